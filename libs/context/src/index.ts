/**
 * @ctxd/context: the pure core of the context pipeline (no I/O).
 * Normalize → Units / Window / Budget → RenderAnthropic / RenderOpenAI, and
 * Assemble for the whole pipeline.
 */
export * as Assemble from "./Assemble.ts"
export * as Budget from "./Budget.ts"
export * as Models from "./Models.ts"
export * as Normalize from "./Normalize.ts"
export * as RenderAnthropic from "./RenderAnthropic.ts"
export * as RenderOpenAI from "./RenderOpenAI.ts"
export * as Units from "./Units.ts"
export * as Window from "./Window.ts"
