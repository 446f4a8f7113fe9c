// The ctxd worker process: `npm start`. Configuration from the environment
// (README, "Configuration"); SIGINT/SIGTERM shut it down gracefully.
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schedule } from "effect"
import * as Logging from "./Logging.ts"
import * as Worker from "./Worker.ts"
import { providerLayer, WorkerConfig } from "./WorkerConfig.ts"

const logging = Layer.unwrapEffect(
  Effect.map(WorkerConfig, (config) => Logging.layer({ level: config.logLevel, name: "ctxd-worker" })),
)

/**
 * A worker starting beside its dependencies (a container stack, a loaded
 * host) keeps trying while NATS or Postgres is not reachable yet, for 60 s,
 * with backoff; any other start failure stops it at once (and a supervisor
 * such as `restart: on-failure` starts it again).
 */
const unreachable = new Set<unknown>(["DatabaseUnavailable", "NatsUnavailable"])

const starting = Layer.retry(
  Worker.layer,
  Schedule.exponential("250 millis").pipe(
    Schedule.either(Schedule.spaced("5 seconds")),
    Schedule.upTo("60 seconds"),
    Schedule.whileInput((error: unknown) => unreachable.has((error as { readonly _tag?: unknown })?._tag)),
    Schedule.tapInput((error: unknown) =>
      Effect.logWarning(
        `${(error as { readonly _tag?: unknown })?._tag === "NatsUnavailable" ? "NATS" : "Postgres"} is not reachable yet; starting again`,
      ),
    ),
  ),
)

const main = Effect.scoped(Effect.zipRight(Worker.serve, Effect.never)).pipe(
  Effect.provide(starting),
  Effect.provide(logging),
  Effect.provide(providerLayer),
)

NodeRuntime.runMain(main, { disablePrettyLogger: true })
