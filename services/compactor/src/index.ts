/**
 * @ctxd/compactor: long sessions stay inside the window. Pure planning
 * (Plan: when and where to cut; View: the summarized history the assembler
 * gets), the fenced Postgres lease and audit (CompactionStore), one
 * compaction end to end (Compactor), the JetStream work queue (WorkQueue)
 * and the NATS endpoints (CompactEndpoint).
 */
export * as CompactEndpoint from "./CompactEndpoint.ts"
export * as CompactionStore from "./CompactionStore.ts"
export * as Compactor from "./Compactor.ts"
export * as CompactorConfig from "./CompactorConfig.ts"
export * as Metrics from "./Metrics.ts"
export * as Plan from "./Plan.ts"
export * as ProviderSummary from "./ProviderSummary.ts"
export * as View from "./View.ts"
export * as WorkQueue from "./WorkQueue.ts"
