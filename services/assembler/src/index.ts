export * as Assembler from "./Assembler.ts"
export * as Decode from "./Decode.ts"
export * as SessionCache from "./SessionCache.ts"
export * as TurnEndpoint from "./TurnEndpoint.ts"
