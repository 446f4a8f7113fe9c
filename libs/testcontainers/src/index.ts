export {
  CtxdContainer,
  DEFAULT_IMAGE,
  defaultImage,
  HTTP_PORT,
  StartedCtxdContainer,
  type ConfigValue,
  type LogLevel,
} from "./CtxdContainer.ts"
export { startCtxdStack, type CtxdStack, type CtxdStackOptions } from "./CtxdStack.ts"
export { unavailable } from "./Engine.ts"
