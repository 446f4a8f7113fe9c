export * as Encoding from "./Encoding.ts"
export * as TokenCounter from "./TokenCounter.ts"
export * as Lru from "./Lru.ts"
