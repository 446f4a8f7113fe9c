// The ctxd worker process: `npm start`. Configuration from the environment
// (docs/configuration.md); SIGINT/SIGTERM, SIGHUP (its terminal closed), or
// the exit of the process that started it, shut it down gracefully; `--help` prints the usage and does nothing else.
// first: the V8 flags it sets on itself hold before anything else is loaded
import * as V8Flags from "./V8Flags.ts"
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer, Option, Schedule } from "effect"
import * as EmbeddedDatabase from "./EmbeddedDatabase.ts"
import * as HttpServer from "./HttpServer.ts"
import * as Logging from "./Logging.ts"
import * as ParentWatch from "./ParentWatch.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Worker from "./Worker.ts"
import * as Usage from "./cli/Usage.ts"
import { embeddedDatabase, fileKnobs, providerLayer, WorkerConfig } from "./WorkerConfig.ts"
import * as WorkerStatus from "./WorkerStatus.ts"

/** The parent this worker was started by (npm's shell, npx's, a launcher), read before anything can outlive it. */
const parent = process.ppid

if (Usage.asked(process.argv.slice(2))) {
  process.stdout.write(`${Usage.serve}\n`)
  process.exit(0)
}

// a closed terminal: the same graceful stop as SIGTERM (Node's default would end the process at once)
process.on("SIGHUP", () => process.kill(process.pid, "SIGTERM"))

const logging = Layer.unwrapEffect(
  Effect.map(Effect.zip(WorkerConfig, fileKnobs), ([config, knobs]) =>
    Logging.layer({ level: config.logLevel, name: "ctxd-worker", secrets: Logging.secretsOf({ ...knobs, ...process.env }) }),
  ),
)

/**
 * A worker starting beside its dependencies (a container stack, a loaded
 * host) keeps trying while NATS or Postgres is not reachable yet, for 60 s,
 * with backoff; any other start failure stops it at once (and a supervisor
 * such as `restart: on-failure` starts it again).
 */
const unreachable = new Set<unknown>(["DatabaseUnavailable", "NatsUnavailable"])
const retried = (error: unknown): boolean => unreachable.has((error as { readonly _tag?: unknown })?._tag)
const starting = Layer.retry(
  Worker.layer,
  Schedule.exponential("250 millis").pipe(
    Schedule.either(Schedule.spaced("5 seconds")),
    Schedule.upTo("60 seconds"),
    Schedule.whileInput(retried),
    // tapInput sees every failure, also the ones that stop the start (a bad config file)
    Schedule.tapInput((error: unknown) =>
      retried(error)
        ? Effect.logWarning(
            `${(error as { readonly _tag?: unknown })?._tag === "NatsUnavailable" ? "NATS" : "Postgres"} is not reachable yet; starting again`,
          )
        : Effect.void,
    ),
  ),
)

/**
 * Built before the worker and released after it: the status the probes
 * report, the HTTP server (`CTXD_HTTP_PORT`, 0 = none) answering `/healthz`
 * and `/readyz` ("starting") while the worker connects, and the trace
 * exporter (flushed after the worker's last spans).
 */
const observability = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* WorkerConfig
    const telemetry = yield* Telemetry.config
    const http =
      config.httpPort === 0
        ? Layer.empty
        : Layer.scopedDiscard(HttpServer.make({ host: config.httpHost, port: config.httpPort, workerId: config.workerId })).pipe(
            Layer.provide(Telemetry.prometheus(telemetry, config.workerId)),
          )
    return Layer.merge(http, Telemetry.tracing(telemetry, config.workerId)).pipe(Layer.provideMerge(WorkerStatus.layer))
  }),
)

/**
 * The embedded database (`EmbeddedDatabase`): started before anything reads
 * `DATABASE_URL` when it is unset and nothing answers on the default
 * Postgres address; stopped after the worker. What was decided is logged.
 */
const embeddedSettings = await Effect.runPromise(embeddedDatabase.pipe(Effect.provide(providerLayer)))
const decision = await EmbeddedDatabase.decide(embeddedSettings)
const embedded = decision === "start" ? await EmbeddedDatabase.start(embeddedSettings.dir) : undefined
if (embedded !== undefined) process.env.DATABASE_URL = embedded.url
const database = Effect.gen(function* () {
  if (embedded === undefined) {
    if (decision === "off" && embeddedSettings.databaseUrl === "")
      yield* Effect.logInfo("DATABASE_URL is unset and CTXD_EMBEDDED_DB=off: using postgresql://postgres@127.0.0.1:5432/postgres")
    return
  }
  yield* Effect.logInfo(
    `DATABASE_URL is unset${embeddedSettings.mode === "auto" ? ` and nothing answers on ${embeddedSettings.probe}` : ""}: started an embedded PostgreSQL on 127.0.0.1:${embedded.port}, data in ${embedded.dir}${embedded.created ? " (created now)" : ""}; set DATABASE_URL to use your own`,
  )
  yield* Effect.addFinalizer(() => Effect.promise(() => embedded.stop()).pipe(Effect.timeout("10 seconds"), Effect.ignore))
})

/** What `V8Flags` set on this process, said once the logger exists. */
const v8Flags = V8Flags.applied.length > 0 ? Effect.logInfo(`V8 flags set: ${V8Flags.applied.join(" ")}`) : Effect.void

/** The failure, with what to do, when NATS or Postgres stayed unreachable through the start's retries (no stack trace). */
const unreachableMessage = (cause: Cause.Cause<unknown>): string | undefined =>
  Option.getOrUndefined(
    Option.flatMap(Cause.failureOption(cause), (error) => {
      const tag = (error as { readonly _tag?: unknown })._tag
      const message = (error as { readonly message?: unknown }).message
      if (tag === "NatsUnavailable") {
        return Option.some(
          `${String(message)}. ctxd needs a NATS server with JetStream: start one with \`nats-server -js\` (or \`docker run -p 4222:4222 nats -js\`), or point NATS_URL at yours`,
        )
      }
      if (tag === "DatabaseUnavailable") {
        return Option.some(
          `${String(message)}. Check DATABASE_URL (unset: an embedded PostgreSQL starts when nothing listens on ${embeddedSettings.probe}; CTXD_EMBEDDED_DB=on forces it)`,
        )
      }
      return Option.none()
    }),
  )

/**
 * Why the worker stopped is logged by its own logger (JSON, secrets scrubbed),
 * not by the runtime's default one; a failure before that logger exists (its
 * own configuration) is written to stderr scrubbed the same way.
 */
let reported = false
// the embedded database's scope is the outermost: it stops after the worker and its pools
const main = Effect.scoped(
  Effect.zipRight(
    Effect.zipRight(Effect.zipRight(v8Flags, Effect.forkScoped(ParentWatch.watch(parent))), database),
    Effect.scoped(Effect.zipRight(Worker.serve, Effect.never)).pipe(Effect.provide(starting), Effect.provide(observability)),
  ),
).pipe(
  Effect.tapErrorCause((cause) => {
    if (Cause.isInterruptedOnly(cause)) return Effect.void
    const unreachable = unreachableMessage(cause)
    return (
      unreachable === undefined ? Effect.logError("the worker stopped", cause) : Effect.logError(`the worker stopped: ${unreachable}`)
    ).pipe(Effect.tap(() => void (reported = true)))
  }),
  Effect.provide(logging),
  Effect.provide(providerLayer),
  // outside the config provider too: an invalid CTXD_CONFIG_FILE fails before anything else exists
  Effect.tapErrorCause((cause) =>
    Effect.sync(() => {
      if (!reported && !Cause.isInterruptedOnly(cause)) {
        process.stderr.write(`${Logging.scrub(`the worker stopped: ${Cause.pretty(cause)}`, Logging.secretsOf(process.env))}\n`)
      }
    }),
  ),
)

NodeRuntime.runMain(main, { disablePrettyLogger: true, disableErrorReporting: true })
