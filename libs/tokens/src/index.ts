export * as Encoding from "./Encoding.ts"
export * as LocalCounter from "./LocalCounter.ts"
export * as Lru from "./Lru.ts"
