export type * as Port from "./Port.ts"
export * as Session from "./session/index.ts"
