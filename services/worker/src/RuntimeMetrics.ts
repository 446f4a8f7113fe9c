/**
 * The worker's runtime gauges (Effect `Metric`s): set from their sources
 * just before each scrape (`/metrics`) and each `<root>.v1.metrics` reply,
 * so they are never stale.
 *
 * - `ctxd_shards_owned`, `ctxd_shards_assigned`: shards this worker holds a
 *   valid lease on, and how many the cluster's assignment gives it;
 * - `ctxd_mailbox_depth`: turns waiting behind a running turn of their
 *   session, over all sessions;
 * - `ctxd_turns_in_flight`: turn requests accepted and not answered yet;
 * - `ctxd_in_flight_request_bytes`: request bytes held by the worker's
 *   endpoints (the `CTXD_MAX_INFLIGHT_BYTES` budget).
 */
import type { ShardLeases } from "@ctxd/sharding"
import { Effect, Metric } from "effect"

const shardsOwned = Metric.gauge("ctxd_shards_owned", { description: "shards this worker owns now (a valid lease)" })
const shardsAssigned = Metric.gauge("ctxd_shards_assigned", { description: "shards the cluster's assignment gives this worker" })
const mailboxDepth = Metric.gauge("ctxd_mailbox_depth", {
  description: "turns waiting behind a running turn of their session, over all sessions",
})
const turnsInFlight = Metric.gauge("ctxd_turns_in_flight", { description: "turn requests accepted and not answered yet" })
const bytesInFlight = Metric.gauge("ctxd_in_flight_request_bytes", {
  description: "request bytes held in flight by this worker's endpoints (the CTXD_MAX_INFLIGHT_BYTES budget)",
})

/** Where the gauges' values come from. */
export interface Sources {
  readonly shards: Effect.Effect<ShardLeases.ShardStatus>
  readonly mailboxDepth: () => number
  readonly turnsInFlight: () => number
  readonly bytesInFlight: () => number
}

/** Sets every gauge from `sources`. */
export const refresh = (sources: Sources): Effect.Effect<void> =>
  Effect.flatMap(sources.shards, (shards) =>
    Effect.all(
      [
        Metric.set(shardsOwned, shards.owned),
        Metric.set(shardsAssigned, shards.assigned),
        Metric.set(mailboxDepth, sources.mailboxDepth()),
        Metric.set(turnsInFlight, sources.turnsInFlight()),
        Metric.set(bytesInFlight, sources.bytesInFlight()),
      ],
      { discard: true },
    ),
  )
