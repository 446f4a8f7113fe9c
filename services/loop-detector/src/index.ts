/**
 * @ctxd/loop-detector: loop detection. The pure core: fold a session's
 * messages incrementally into a bounded {@link LoopState.State}, judge it
 * with {@link Detector.verdict}, and answer a loop with {@link Nudge.action}
 * according to the tenant/agent {@link LoopConfig.Policy}. Around it: the
 * optional LLM {@link Judge} (asked through `@ctxd/summarizer`'s `Llm` when a
 * finding is borderline) and the `ctx.v1.loop.check` endpoint ({@link LoopCheck}).
 */
export * as Canonical from "./Canonical.ts"
export * as Detector from "./Detector.ts"
export * as Judge from "./Judge.ts"
export * as LoopCheck from "./LoopCheck.ts"
export * as LoopConfig from "./LoopConfig.ts"
export * as LoopState from "./LoopState.ts"
export * as Nudge from "./Nudge.ts"
