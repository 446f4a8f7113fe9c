export type * as Port from "./Port.ts"
