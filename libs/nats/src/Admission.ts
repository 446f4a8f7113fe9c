/**
 * A budget of request bytes in flight, shared by the endpoints of one
 * process: a request is admitted only if its bytes fit in what is left, so
 * memory stays bounded under a burst however many requests arrive. The check
 * is one comparison on the raw payload's length (or, for a request whose body
 * waits in the object store, on its declared size): a request that does not
 * fit is answered `Busy` at once, without decoding anything.
 *
 * One request larger than the whole budget is still admitted when nothing
 * else is in flight, so a budget below the largest accepted request never
 * makes that request impossible.
 */
import { Config, Context, Effect, Layer } from "effect"

/** The budget. */
export interface AdmissionService {
  /** The limit in bytes (`Infinity` = unbounded). */
  readonly maxBytes: number
  /** Takes `bytes` from the budget; false (and nothing taken) when they do not fit. */
  readonly tryAcquire: (bytes: number) => boolean
  /** Gives back what {@link AdmissionService.tryAcquire} took. */
  readonly release: (bytes: number) => void
  /** Bytes admitted and not released yet. */
  readonly inFlightBytes: () => number
}

/** The byte budget shared by the endpoints in this context (see {@link layer}). */
export class Admission extends Context.Tag("@ctxd/nats/Admission")<Admission, AdmissionService>() {}

/** The default budget: 16 MiB of request bytes in flight per process. */
export const DEFAULT_MAX_BYTES = 16 * 1024 * 1024

/** A budget of `maxBytes` (a non-positive or non-finite value means unbounded). */
export const make = (maxBytes: number): AdmissionService => {
  const limit = Number.isFinite(maxBytes) && maxBytes > 0 ? maxBytes : Number.POSITIVE_INFINITY
  let used = 0
  return {
    maxBytes: limit,
    tryAcquire: (bytes) => {
      if (used > 0 && used + bytes > limit) return false
      used += bytes
      return true
    },
    release: (bytes) => {
      used = Math.max(0, used - bytes)
    },
    inFlightBytes: () => used,
  }
}

/** {@link make} as a layer. */
export const layer = (maxBytes: number): Layer.Layer<Admission> => Layer.sync(Admission, () => make(maxBytes))

/** `CTXD_MAX_INFLIGHT_BYTES` (default 16 MiB; 0 = unbounded). */
export const config = Config.integer("CTXD_MAX_INFLIGHT_BYTES").pipe(
  Config.withDefault(DEFAULT_MAX_BYTES),
  Config.withDescription("Request bytes one worker holds in flight (running + waiting) before answering Busy; 0 = unbounded"),
)

/** {@link layer} configured from the environment (`CTXD_MAX_INFLIGHT_BYTES`). */
export const layerConfig = Layer.unwrapEffect(Effect.map(config, layer))
