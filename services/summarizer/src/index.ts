/**
 * @ctxd/summarizer: summaries of conversation spans (one-shot, rolling,
 * structured) through the Anthropic and OpenAI SDKs, hierarchical when a
 * span exceeds the summarizer's window; the `ctx.v1.summarize` endpoint.
 */
export * as Llm from "./Llm.ts"
export * as Prompts from "./Prompts.ts"
export * as Snapshot from "./Snapshot.ts"
export * as SummarizeEndpoint from "./SummarizeEndpoint.ts"
export * as Summarizer from "./Summarizer.ts"
export * as SummarizerConfig from "./SummarizerConfig.ts"
export * as Transcript from "./Transcript.ts"
