/**
 * @ctxd/context: the pure core of the context pipeline (no I/O).
 * Normalize → Pipeline (Window → SchemaCompression → Masking → Budget →
 * Units → Reasoning → the format's render laid out by CacheLayout →
 * Proactive); the provider adapters (`providers/<format>/`: normalize,
 * render, cache rules, count body, usage reading, opaque blocks; chosen by
 * `Providers.of`; each model provider's descriptor — tokenizer, exact count,
 * API errors — by `Providers.ofProvider`); around a turn: Toolsets, Knowledge, Recall, MemoryTools, Waste, Models; the cache
 * economics: CostModel (prices; PriceFile: configured ones, validated),
 * CacheSim (provider cache billing), CacheBlocks (bodies → CacheSim blocks; the
 * full-history and sliding-window baselines), CachePlanner (when an edit pays) and
 * SessionLengths (how long a session is expected to go on); ProviderCompaction
 * (the providers' own summaries in a history: a boundary nothing crosses);
 * AgentLogs (recorded agent logs → replay sessions).
 */
export * as AgentLogs from "./AgentLogs.ts"
export * as BoundReasoning from "./BoundReasoning.ts"
export * as Budget from "./Budget.ts"
export * as CacheBlocks from "./CacheBlocks.ts"
export * as CacheLayout from "./CacheLayout.ts"
export * as CacheMiss from "./CacheMiss.ts"
export * as CachePlanner from "./CachePlanner.ts"
export * as CacheSim from "./CacheSim.ts"
export * as CostModel from "./CostModel.ts"
export * as Knowledge from "./Knowledge.ts"
export * as Ledger from "./Ledger.ts"
export * as Masking from "./Masking.ts"
export * as MemoryRetrieval from "./MemoryRetrieval.ts"
export * as MemoryTools from "./MemoryTools.ts"
export * as MidSystem from "./MidSystem.ts"
export * as Models from "./Models.ts"
export * as NoHarm from "./NoHarm.ts"
export * as Normalize from "./Normalize.ts"
export * as Pipeline from "./Pipeline.ts"
export * as PriceFile from "./PriceFile.ts"
export * as ProviderCompaction from "./ProviderCompaction.ts"
export * as ProviderKeys from "./ProviderKeys.ts"
export * as Providers from "./providers/Providers.ts"
export * as ProviderUsage from "./providers/UsageFields.ts"
export * as CacheDiagnostics from "./providers/CacheDiagnostics.ts"
export * as AnthropicProvider from "./providers/anthropic/index.ts"
export * as OpenAIChatProvider from "./providers/openai-chat/index.ts"
export * as OpenAIResponsesProvider from "./providers/openai-responses/index.ts"
export * as GeminiProvider from "./providers/gemini/index.ts"
export * as ProviderAdapter from "./providers/Adapter.ts"
export * as ModelProvider from "./providers/ModelProvider.ts"
export * as ProviderApi from "./providers/ApiErrors.ts"
export * as Proactive from "./Proactive.ts"
export * as Reasoning from "./Reasoning.ts"
export * as Recall from "./Recall.ts"
export * as RenderAnthropic from "./providers/anthropic/Render.ts"
export * as RenderOpenAI from "./providers/openai-chat/Render.ts"
export * as RenderGemini from "./providers/gemini/Render.ts"
export * as RenderResponses from "./providers/openai-responses/Render.ts"
export * as RenderedJson from "./RenderedJson.ts"
export * as SchemaCompression from "./SchemaCompression.ts"
export * as SessionLengths from "./SessionLengths.ts"
export * as Toolsets from "./Toolsets.ts"
export * as ToolSearch from "./ToolSearch.ts"
export * as Units from "./Units.ts"
export * as Waste from "./Waste.ts"
export * as Window from "./Window.ts"
