/**
 * @ctxd/token-counter: exact token counts where the provider offers them
 * (Anthropic `count_tokens`, OpenAI Responses `input_tokens`, Gemini
 * `countTokens`), cached by
 * content hash and behind one circuit breaker per provider, local counts (js-tiktoken, heuristic) otherwise, and drift
 * calibration against the usage the provider bills. In-process through
 * {@link TokenCounter.TokenCounter}; over NATS on `ctx.v1.tokens.count`
 * ({@link CountEndpoint}) and `ctx.v1.usage.<tenant>.<session>` ({@link UsageEndpoint}).
 */
export * as AnthropicCounter from "./AnthropicCounter.ts"
export * as CacheCheck from "./CacheCheck.ts"
export * as Calibration from "./Calibration.ts"
export * as CalibrationState from "./CalibrationState.ts"
export * as CircuitBreaker from "./CircuitBreaker.ts"
export * as CountEndpoint from "./CountEndpoint.ts"
export * as ExactCounter from "./ExactCounter.ts"
export * as GeminiCounter from "./GeminiCounter.ts"
export * as OpenAICounter from "./OpenAICounter.ts"
export * as SingleFlight from "./SingleFlight.ts"
export * as TokenCounter from "./TokenCounter.ts"
export * as TokenCounterConfig from "./TokenCounterConfig.ts"
export * as UsageEndpoint from "./UsageEndpoint.ts"
export * as UsageMetrics from "./UsageMetrics.ts"
