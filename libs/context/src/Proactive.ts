/**
 * Proactive compression: when a prompt would use more than a threshold of
 * its budget (default 0.85), escalate step by step, each step on top of the
 * previous ones, until it is under the threshold or the ladder ends:
 *
 * 1. tool schema compression one level stronger at a time
 *    (`minify` → `truncate` → `aggressive`, from the configured level);
 * 2. a smaller mask window: first the configured K (default 3) but masking
 *    beyond the batch grid under pressure (larger raw JSON first, only as
 *    much as needed), then K halved (rounded down) down to 1;
 * 3. duplicate-result removal (identical results of a tool become a
 *    reference to the first).
 *
 * Sticky: the rung reached is kept for the session (pass it back as
 * `from`), so a session under pressure escalates a few times and then stays
 * put instead of flipping between levels turn by turn (each flip would
 * rewrite the cached prefix).
 *
 * Utilization here is what the window would cost before budget eviction
 * (system + tools + memory + window history, after masking) over the
 * budget: eviction refills any room the steps free, so the prompt actually
 * sent says nothing about pressure. The steps change the prompt prefix;
 * they run only under pressure, where the alternative is to evict history.
 */
import type { Turn } from "@ctxd/contracts"
import * as SchemaCompression from "./SchemaCompression.ts"

/** One rung of the ladder: how hard to compress. */
export interface Level {
  readonly toolCompression: SchemaCompression.Level
  /** Results kept whole (K); undefined: masking off. */
  readonly maskKeep: number | undefined
  /** Mask beyond the batch grid, as much as needed to reach the threshold. */
  readonly pressure: boolean
  readonly dedupe: boolean
}

/** A step taken, as reported. */
export type Step = Turn.ProactiveStep

/** The default threshold: 0.85. */
export const DEFAULT_THRESHOLD = 0.85

/** K used when masking was off and the ladder turns it on: 3. */
export const DEFAULT_KEEP = 3

/** The ladder above `base`: each rung with the step that leads to it. */
export const ladder = (base: Level): Array<{ readonly kind: Step["kind"]; readonly value: string | number; readonly level: Level }> => {
  const out: Array<{ kind: Step["kind"]; value: string | number; level: Level }> = []
  let level = base
  for (let c = SchemaCompression.stronger(level.toolCompression); c !== undefined; c = SchemaCompression.stronger(c)) {
    level = { ...level, toolCompression: c }
    out.push({ kind: "toolCompression", value: c, level })
  }
  let keep = Math.max(1, level.maskKeep ?? DEFAULT_KEEP)
  level = { ...level, maskKeep: keep, pressure: true }
  out.push({ kind: "maskKeep", value: keep, level })
  while (keep > 1) {
    keep = Math.max(1, Math.floor(keep / 2))
    level = { ...level, maskKeep: keep }
    out.push({ kind: "maskKeep", value: keep, level })
  }
  if (!level.dedupe) {
    level = { ...level, dedupe: true }
    out.push({ kind: "dedupe", value: "on", level })
  }
  return out
}

/** The outcome of {@link escalate}. */
export interface Outcome<A> {
  /** The last attempt's result. */
  readonly result: A
  readonly level: Level
  /** Rungs of the ladder in effect (0 = base): keep it for the session and pass it back as `from`. */
  readonly rung: number
  readonly utilizationBefore: number
  readonly utilizationAfter: number
  readonly steps: Array<Step>
}

/**
 * Runs `attempt` at rung `from` of the {@link ladder} over `base` (0, the
 * default, is `base` itself; clamped to the ladder); while its utilization
 * is above `threshold`, climbs one rung at a time. Returns the last attempt,
 * the rung reached and the steps taken now (none when already under the
 * threshold).
 */
export const escalate = <A>(
  base: Level,
  threshold: number,
  attempt: (level: Level) => { readonly result: A; readonly utilization: number },
  from = 0,
): Outcome<A> => {
  const rungs = ladder(base)
  let rung = Math.max(0, Math.min(rungs.length, Math.floor(from)))
  let level = rung === 0 ? base : rungs[rung - 1]!.level
  let current = attempt(level)
  const before = current.utilization
  const steps: Array<Step> = []
  while (current.utilization > threshold && rung < rungs.length) {
    const next = rungs[rung]!
    rung++
    level = next.level
    current = attempt(level)
    steps.push({ kind: next.kind, value: next.value, utilization: current.utilization })
  }
  return { result: current.result, level, rung, utilizationBefore: before, utilizationAfter: current.utilization, steps }
}
