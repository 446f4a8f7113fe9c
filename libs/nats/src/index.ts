export * as Endpoint from "./Endpoint.ts"
export * as Json from "./Json.ts"
export * as NatsClient from "./NatsClient.ts"
export * as Request from "./Request.ts"
