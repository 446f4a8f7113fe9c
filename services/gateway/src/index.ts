export type * as Port from "./Port.ts"
export * as Options from "./Options.ts"
export * as Routes from "./Routes.ts"
export * as HeaderPolicy from "./HeaderPolicy.ts"
export * as Body from "./Body.ts"
export * as UsageTap from "./UsageTap.ts"
export * as Metrics from "./Metrics.ts"
export * as DefaultSession from "./DefaultSession.ts"
export { startServer, limits, type GatewayServer } from "./Server.ts"
export type {
  ServerOptions,
  Mode,
  Failure,
  Provider,
  Upstreams,
  Identity,
  RequestInfo,
  SessionInput,
  SessionResult,
  Logger,
} from "./Options.ts"
export * as InProcessPort from "./ports/InProcessPort.ts"
export * as NatsPort from "./ports/NatsPort.ts"
export * as Shadow from "./Shadow.ts"
export * as TurnRequests from "./TurnRequests.ts"
export * as GatewayConfig from "./GatewayConfig.ts"
export * as GatewayEnv from "./GatewayEnv.ts"
export * as Session from "./session/index.ts"
