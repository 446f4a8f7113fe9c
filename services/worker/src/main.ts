// The ctxd worker process: `npm start`. Configuration from the environment
// (README, "Configuration"); SIGINT/SIGTERM shut it down gracefully.
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import * as Logging from "./Logging.ts"
import * as Worker from "./Worker.ts"
import { providerLayer, WorkerConfig } from "./WorkerConfig.ts"

const logging = Layer.unwrapEffect(
  Effect.map(WorkerConfig, (config) => Logging.layer({ level: config.logLevel, name: "ctxd-worker" })),
)

const main = Effect.scoped(Effect.zipRight(Worker.serve, Effect.never)).pipe(
  Effect.provide(Worker.layer),
  Effect.provide(logging),
  Effect.provide(providerLayer),
)

NodeRuntime.runMain(main, { disablePrettyLogger: true })
