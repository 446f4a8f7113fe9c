/**
 * @ctxd/loop-detector: the pure core of loop detection. Fold a session's
 * messages incrementally into a bounded {@link LoopState.State}, judge it
 * with {@link Detector.verdict}, and answer a loop with {@link Nudge.action}
 * according to the tenant/agent {@link LoopConfig.Policy}.
 */
export * as Canonical from "./Canonical.ts"
export * as LoopConfig from "./LoopConfig.ts"
export * as Detector from "./Detector.ts"
export * as LoopState from "./LoopState.ts"
export * as Nudge from "./Nudge.ts"
export * as LoopCheck from "./LoopCheck.ts"
export * as Judge from "./Judge.ts"
