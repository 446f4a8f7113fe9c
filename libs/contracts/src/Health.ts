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
}).annotations({ identifier: "HealthReply" })
export type HealthReply = typeof HealthReply.Type
