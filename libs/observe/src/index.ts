export * as MetricLabels from "./MetricLabels.ts"
export * as Spans from "./Spans.ts"
export * as TraceContext from "./TraceContext.ts"
export * as ProviderErrors from "./ProviderErrors.ts"
