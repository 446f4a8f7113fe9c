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
 *
 * Fair share: a request that names its tenant (the turn endpoints read it
 * from the subject) is also held against that tenant's share: at most
 * `tenantMaxTurns` requests (turns) in flight, running or waiting, and at
 * most `tenantMaxBytes` of the budget. A tenant over its share is refused
 * (`Busy`), the others are not: one tenant's burst cannot take the whole
 * worker, nor queue ahead of the others' turns. As for the budget, one
 * request larger than the tenant's share passes when the tenant holds
 * nothing. A tenant is tracked only while it holds something (the map's size
 * is bounded by the requests in flight).
 */
import * as ConfigReference from "@ctxd/config/ConfigReference"
import { MetricLabels } from "@ctxd/observe"
import { Config, Context, Effect, Layer, Metric, MetricLabel } from "effect"
import * as FlowControl from "./FlowControl.ts"
import type { Share } from "./FlowControl.ts"

/** Why a request was refused: its tenant has its share of turns or of bytes in flight, or the worker's budget is spent. */
export type Refusal = "turns" | "bytes" | "worker"

/** What one tenant holds now. */
export interface Held {
  readonly bytes: number
  readonly turns: number
}

/** The budget. */
export interface AdmissionService {
  /** The limit in bytes (`Infinity` = unbounded). */
  readonly maxBytes: number
  /** Bytes one tenant may hold (`Infinity` = no per-tenant limit). */
  readonly tenantMaxBytes: number
  /** Requests (turns) one tenant may have in flight, running or waiting (`Infinity` = no per-tenant limit). */
  readonly tenantMaxTurns: number
  /** Takes `bytes` from the budget; false (and nothing taken) when they do not fit. */
  readonly tryAcquire: (bytes: number) => boolean
  /** Gives back what {@link AdmissionService.tryAcquire} took. */
  readonly release: (bytes: number) => void
  /**
   * Takes one request of `bytes` from the budget and from `tenant`'s share;
   * `undefined` when admitted, else why not (and nothing taken).
   */
  readonly tryAcquireFor: (tenant: string, bytes: number) => Refusal | undefined
  /** Gives back what {@link AdmissionService.tryAcquireFor} took. */
  readonly releaseFor: (tenant: string, bytes: number) => void
  /** Bytes admitted and not released yet. */
  readonly inFlightBytes: () => number
  /** What `tenant` holds now (zeros when nothing). */
  readonly held: (tenant: string) => Held
  /** What `tenant` may hold: its own share where it has one (`overrides`), else the default ({@link AdmissionService.tenantMaxBytes}, {@link AdmissionService.tenantMaxTurns}). */
  readonly shareFor: (tenant: string) => Held
  /** Tenants holding something now. */
  readonly tenants: () => number
}

/** The byte budget shared by the endpoints in this context (see {@link layer}). */
export class Admission extends Context.Tag("@ctxd/nats/Admission")<Admission, AdmissionService>() {}

export type { Share } from "./FlowControl.ts"

const bound = (n: number | undefined) => (n !== undefined && Number.isFinite(n) && n > 0 ? n : Number.POSITIVE_INFINITY)

/**
 * A budget of `maxBytes` (a non-positive or non-finite value means
 * unbounded), and each tenant's `share` of it; `overrides` gives a tenant its
 * own share (asked on every request, so a reloaded configuration applies to
 * the next one; undefined = the default share).
 */
export const make = (maxBytes: number, share: Share = {}, overrides?: (tenant: string) => Share | undefined): AdmissionService => {
  const limit = bound(maxBytes)
  const tenantMaxBytes = Math.min(limit, bound(share.maxBytes))
  const tenantMaxTurns = bound(share.maxTurns)
  const shareFor = (tenant: string): Held => {
    const own = overrides?.(tenant)
    return own === undefined
      ? { bytes: tenantMaxBytes, turns: tenantMaxTurns }
      : { bytes: Math.min(limit, bound(own.maxBytes)), turns: bound(own.maxTurns) }
  }
  let used = 0
  // only tenants holding something: an entry goes when its last byte and turn are released
  const tenants = new Map<string, { bytes: number; turns: number }>()
  const none: Held = { bytes: 0, turns: 0 }
  const entry = (tenant: string) => {
    let held = tenants.get(tenant)
    if (held === undefined) {
      held = { bytes: 0, turns: 0 }
      tenants.set(tenant, held)
    }
    return held
  }
  /** Forgets a tenant holding nothing. */
  const settle = (tenant: string, held: { bytes: number; turns: number }) => {
    if (held.bytes <= 0 && held.turns <= 0) tenants.delete(tenant)
  }
  const tryAcquire = (bytes: number) => {
    if (used > 0 && used + bytes > limit) return false
    used += bytes
    return true
  }
  const release = (bytes: number) => {
    used = Math.max(0, used - bytes)
  }
  return {
    maxBytes: limit,
    tenantMaxBytes,
    tenantMaxTurns,
    tryAcquire,
    release,
    tryAcquireFor: (tenant, bytes) => {
      const held = tenants.get(tenant)
      if (held !== undefined) {
        const may = shareFor(tenant)
        if (held.turns >= may.turns) return "turns"
        if (held.bytes > 0 && held.bytes + bytes > may.bytes) return "bytes"
      }
      if (!tryAcquire(bytes)) return "worker"
      const taken = entry(tenant)
      taken.bytes += bytes
      taken.turns++
      return undefined
    },
    releaseFor: (tenant, bytes) => {
      release(bytes)
      const held = tenants.get(tenant)
      if (held === undefined) return
      held.bytes = Math.max(0, held.bytes - bytes)
      held.turns = Math.max(0, held.turns - 1)
      settle(tenant, held)
    },
    inFlightBytes: () => used,
    held: (tenant) => {
      const held = tenants.get(tenant)
      return held === undefined ? none : { bytes: held.bytes, turns: held.turns }
    },
    tenants: () => tenants.size,
    shareFor,
  }
}

/** {@link make} as a layer. */
export const layer = (maxBytes: number, share?: Share, overrides?: (tenant: string) => Share | undefined): Layer.Layer<Admission> =>
  Layer.sync(Admission, () => make(maxBytes, share, overrides))

/** `CTXD_MAX_INFLIGHT_BYTES` (default 16 MiB, `FlowControl.defaults`; 0 = unbounded). */
export const config = Config.integer("CTXD_MAX_INFLIGHT_BYTES").pipe(
  Config.withDefault(FlowControl.defaults.maxInflightBytes),
  Config.withDescription(
    "Request bytes one worker holds in flight (running and waiting, all endpoints but health; a request by reference counts its declared size). A request that does not fit is answered Busy at once, from its length alone; one larger than the budget still passes when nothing else is in flight. 0: unbounded",
  ),
)

const percent = (name: string, fallback: number, description: string) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.withDescription(description),
    ConfigReference.within({ min: 1, max: 100 }, "a percentage 1..100"),
  )

/**
 * `CTXD_TENANT_BYTES_PERCENT` and `CTXD_TENANT_TURNS_PERCENT` (defaults 50
 * and 100, `FlowControl.defaults`; the share they give: `FlowControl.derive`).
 */
export const shareConfig = Config.all({
  bytesPercent: percent(
    "CTXD_TENANT_BYTES_PERCENT",
    FlowControl.defaults.tenantBytesPercent,
    "Fair share: percent of CTXD_MAX_INFLIGHT_BYTES one tenant (the subject's <tenant>) may hold in flight on a worker; over it, its requests are answered Busy at once while other tenants are still admitted (one larger request passes when the tenant holds nothing). 100: no per-tenant limit; a tenant's share.bytesPercent overrides it",
  ),
  turnsPercent: percent(
    "CTXD_TENANT_TURNS_PERCENT",
    FlowControl.defaults.tenantTurnsPercent,
    "Fair share: percent of CTXD_MAX_CONCURRENT (rounded up, at least 1: 25 is 1 of 4) one tenant may have in flight on a worker (running or waiting, forwarded ones included); beyond it its turns are answered Busy at once. It also limits a tenant alone on a worker, hence 100 (no limit) by default; set 25 on shared workers. A tenant's share.turnsPercent overrides it",
  ),
})

/** {@link layer} configured from the environment (`CTXD_MAX_INFLIGHT_BYTES`; no per-tenant share). */
export const layerConfig = Layer.unwrapEffect(Effect.map(config, (maxBytes) => layer(maxBytes)))

const busy = Metric.counter("ctxd_tenant_busy_total", {
  description: "requests answered Busy because their tenant was over its share, by tenant and limit (bytes, turns)",
  incremental: true,
})

/** Counts one `Busy` answer to `tenant` over its `limit` (the `tenant` label is bounded: `MetricLabels`). */
export const recordBusy = (tenant: string, limit: "bytes" | "turns"): void =>
  busy.unsafeUpdate(1, [MetricLabel.make("tenant", MetricLabels.tenant(tenant)), MetricLabel.make("limit", limit)])
