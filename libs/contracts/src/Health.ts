/** `<root>.v1.health`: liveness and readiness of one worker. */
import { Schema } from "effect"

export const HealthReply = Schema.Struct({
  ok: Schema.Literal(true),
  worker: Schema.String,
  version: Schema.String,
  uptimeMs: Schema.Number,
  inFlight: Schema.Number,
  postgres: Schema.Boolean,
  draining: Schema.Boolean,
  /** Request bytes this worker holds in flight (running and waiting, over all its endpoints). */
  inFlightBytes: Schema.optional(Schema.Number),
  /** The limit of `inFlightBytes` (`CTXD_MAX_INFLIGHT_BYTES`); beyond it requests are answered `Busy`. */
  maxInFlightBytes: Schema.optional(Schema.Number),
  /** Shards this worker owns now. */
  shards: Schema.optional(Schema.Number),
  /** Turns this worker handled as the owner of their session's shard since it started. */
  turns: Schema.optional(Schema.Number),
  /** Turns this worker forwarded to their shard's owner since it started. */
  forwarded: Schema.optional(Schema.Number),
  /** The configuration in effect (`CTXD_CONFIG_FILE`, `CTXD_TENANTS_FILE`): its hash (`none` without a file), reloads applied and edits rejected since start. */
  config: Schema.optional(Schema.Struct({ hash: Schema.String, reloads: Schema.Number, rejected: Schema.Number })),
}).annotations({ identifier: "HealthReply" })
export type HealthReply = typeof HealthReply.Type
