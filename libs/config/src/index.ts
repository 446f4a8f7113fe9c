export * as ConfigFile from "./ConfigFile.ts"
export * as RuntimeConfig from "./RuntimeConfig.ts"
export * as ConfigReference from "./ConfigReference.ts"
export * as GatewaySection from "./GatewaySection.ts"
