/**
 * The worker's configuration, read from the environment (constant case) and,
 * when `CTXD_CONFIG_FILE` names a JSON file, from that file for any key the
 * environment does not set. The README's config table lists every key.
 */
import { AssemblerConfig } from "@ctxd/assembler"
import { type CostModel, Pipeline, PriceFile, ProviderKeys } from "@ctxd/context"
import { ShardingConfig } from "@ctxd/sharding"
import { Subjects, Tenants } from "@ctxd/contracts"
import { NatsAuth } from "@ctxd/nats"
import { Config, type ConfigError, ConfigProvider, Data, Effect, Either, Layer, Option, ParseResult, Schema } from "effect"
import { readFileSync } from "node:fs"
import * as EmbeddedDatabase from "./EmbeddedDatabase.ts"
import * as HttpServer from "./HttpServer.ts"

const int = (name: string, fallback: number, description: string) =>
  Config.integer(name).pipe(Config.withDefault(fallback), Config.withDescription(description))

/** Everything the worker process reads at start. */
export const WorkerConfig = Config.all({
  natsUrl: Config.string("NATS_URL").pipe(
    Config.withDefault("nats://127.0.0.1:4222"),
    Config.withDescription("NATS server(s), comma separated"),
  ),
  // NATS_CREDS, NATS_NKEY_SEED, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_TLS_CA/_CERT/_KEY
  natsAuth: NatsAuth.config,
  subjectRoot: Config.string("CTXD_SUBJECT_ROOT").pipe(
    Config.withDefault("ctx"),
    Config.withDescription("First token(s) of every subject: <root>.v1.turn.<tenant>.<session>"),
  ),
  legacySubjects: Config.boolean("CTXD_LEGACY_SUBJECTS").pipe(
    Config.withDefault(true),
    Config.withDescription(
      "Also serve the tenant-less <root>.v1.summarize and <root>.v1.tokens.count (NATS permissions cannot scope them; false in a secure deployment)",
    ),
  ),
  workerKeyTenants: Config.string("CTXD_WORKER_KEY_TENANTS").pipe(
    Config.withDefault("*"),
    Config.map(ProviderKeys.parseWorkerKeyTenants),
    Config.withDescription(
      "Tenants whose provider calls (summaries, loop judge, exact counts) may use the worker's own keys when their section names none: * = all, empty = none, else comma-separated tenant ids",
    ),
  ),
  queueGroup: Config.string("CTXD_QUEUE_GROUP").pipe(
    Config.withDefault("ctxd-workers"),
    Config.withDescription("Queue group the workers share"),
  ),
  maxPayload: int("CTXD_MAX_PAYLOAD", 1024 * 1024, "Largest accepted request in bytes (capped at the server's max_payload)"),
  // 4: a turn is mostly CPU on one core; more at once only interleave their CPU work between
  // socket reads, so under a burst requests wait unread (measured: npm run bench -- burst:
  // 16 at once left 18 % of a 10,000-turn burst unanswered within 60 s, 4 at once none)
  maxConcurrent: int("CTXD_MAX_CONCURRENT", 4, "Turns handled at once by one worker"),
  maxSessions: int("CTXD_SESSION_CACHE_SESSIONS", AssemblerConfig.defaults.maxSessions, "Sessions kept in memory"),
  maxMessages: int("CTXD_SESSION_CACHE_MESSAGES", AssemblerConfig.defaults.maxMessages, "Messages kept in memory over all sessions"),
  mailbox: int("CTXD_SESSION_MAILBOX", AssemblerConfig.defaults.mailbox, "Turns of one session that may wait behind the running one before Busy"),
  forwardTimeoutMs: int("CTXD_FORWARD_TIMEOUT_MS", 5_000, "How long a turn forwarded to its shard's owner waits for the reply"),
  windowMessages: int("CTXD_WINDOW_MESSAGES", Pipeline.defaults.windowMessages, "Default minimum of recent messages in the window"),
  windowStep: int("CTXD_WINDOW_STEP", Pipeline.defaults.windowStep, "Default step of the window's cut"),
  freshTailMessages: int("CTXD_FRESH_TAIL_MESSAGES", Pipeline.defaults.freshTailMessages, "Default protected fresh tail"),
  loopPolicy: Config.literal("nudge", "escalate", "off")("CTXD_LOOP_POLICY").pipe(
    Config.withDefault("nudge" as const),
    Config.withDescription("What to do when an agent loops: nudge, escalate (report only) or off"),
  ),
  defaultToolsets: Config.array(Config.string(), "CTXD_DEFAULT_TOOLSETS").pipe(
    Config.withDefault([] as ReadonlyArray<string>),
    Config.withDescription("Toolsets sent from the start when a request does not name them (comma separated)"),
  ),
  workerId: Config.string("CTXD_WORKER_ID").pipe(
    Config.withDefault(ShardingConfig.defaultWorkerId()),
    Config.withDescription("This worker's id in the cluster, logs and health replies; unique per process start"),
  ),
  logLevel: Config.string("LOG_LEVEL").pipe(Config.withDefault("info"), Config.withDescription("pino level")),
  shutdownTimeoutMs: int("CTXD_SHUTDOWN_TIMEOUT_MS", 10_000, "How long in-flight turns may take to finish at shutdown"),
  httpPort: int("CTXD_HTTP_PORT", HttpServer.defaults.port, "Port of /metrics (Prometheus), /healthz and /readyz; 0 = no HTTP server").pipe(
    Config.validate({ message: "a port number 0..65535 (0: off)", validation: (n) => n >= 0 && n <= 65535 }),
  ),
  httpHost: Config.string("CTXD_HTTP_HOST").pipe(
    Config.withDefault(HttpServer.defaults.host),
    Config.withDescription("Address the HTTP server binds to"),
  ),
})
export type WorkerConfig = Config.Config.Success<typeof WorkerConfig>

/**
 * The tenants' sections: the JSON file named by `CTXD_TENANTS_FILE`,
 * `{"<tenant>": {<turn options>, "providers": {...}, "share": {...}}}` (e.g.
 * `{"acme": {"toolCompression": "truncate", "providers": {"anthropic":
 * {"apiKeyEnv": "ACME_ANTHROPIC_KEY"}}}}`; `Tenants.Tenant`), validated at start.
 */
export const tenantSections: Effect.Effect<Readonly<Record<string, Tenants.Tenant>>, Error> = Effect.gen(function* () {
  const file = process.env.CTXD_TENANTS_FILE
  if (file === undefined || file === "") return {}
  const text = yield* Effect.try({
    try: () => readFileSync(file, "utf8"),
    catch: (e) => new Error(`CTXD_TENANTS_FILE ${file}: ${String(e)}`),
  })
  const tenants = yield* Schema.decodeUnknown(Schema.parseJson(Schema.Record({ key: Schema.String, value: Tenants.Tenant })))(
    text,
  ).pipe(Effect.mapError((e) => new Error(`CTXD_TENANTS_FILE ${file} is not valid: ${ParseResult.TreeFormatter.formatErrorSync(e)}`)))
  const bad = Object.keys(tenants).filter((tenant) => !Subjects.isValidToken(tenant))
  if (bad.length > 0) {
    return yield* Effect.fail(new Error(`CTXD_TENANTS_FILE ${file}: not tenant ids ([A-Za-z0-9_-]{1,128}): ${bad.join(", ")}`))
  }
  return tenants
})

/** The price file cannot be read or is not valid; the message names the file, and each problem's row and field. */
export class InvalidPricesFile extends Data.TaggedError("InvalidPricesFile")<{
  readonly message: string
  readonly file: string
}> {}

/**
 * The model price table the cache planner uses: `CostModel`'s built-in table,
 * under the rows of the JSON file named by `CTXD_PRICES_FILE` when it is set,
 * `{"models": [{"match": "<model-name prefix>", ...ModelPrices fields}]}`
 * (format and rules: `PriceFile`), validated at start.
 */
export const priceTable: Effect.Effect<CostModel.PriceTable, ConfigError.ConfigError | InvalidPricesFile> = Effect.gen(
  function* () {
    const file = yield* Config.option(
      Config.string("CTXD_PRICES_FILE").pipe(
        Config.withDescription("JSON file of model price rows over the built-in table (README, \"Prices\")"),
      ),
    )
    if (Option.isNone(file) || file.value === "") return AssemblerConfig.defaults.prices
    const path = file.value
    const read = yield* Effect.either(Effect.try({ try: () => readFileSync(path, "utf8"), catch: (e) => e }))
    if (Either.isLeft(read)) {
      const reason = read.left instanceof Error ? read.left.message : String(read.left)
      return yield* new InvalidPricesFile({ file: path, message: `CTXD_PRICES_FILE ${path}: ${reason}` })
    }
    const decoded = PriceFile.fromJson(read.right)
    if (Either.isLeft(decoded)) {
      return yield* new InvalidPricesFile({ file: path, message: `CTXD_PRICES_FILE ${path} is not valid: ${decoded.left.message}` })
    }
    yield* Effect.logInfo(`CTXD_PRICES_FILE ${path}: ${decoded.right.rows.length} price rows before the built-in table`)
    return decoded.right
  },
)

/**
 * The environment first, then the JSON file named by `CTXD_CONFIG_FILE`
 * (keys as in the environment, e.g. `{"NATS_URL": "nats://..."}`).
 */
export const providerLayer: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.sync(() => {
    const env = ConfigProvider.fromEnv()
    const file = process.env.CTXD_CONFIG_FILE
    if (file === undefined || file === "") return Layer.setConfigProvider(env)
    const json = JSON.parse(readFileSync(file, "utf8")) as object
    return Layer.setConfigProvider(env.pipe(ConfigProvider.orElse(() => ConfigProvider.fromJson(json))))
  }),
)

/** The embedded database's settings (`EmbeddedDatabase`), read before the worker starts. */
export const embeddedDatabase = Config.all({
  mode: Config.literal("auto", "on", "off")("CTXD_EMBEDDED_DB").pipe(
    Config.withDefault(EmbeddedDatabase.defaults.mode),
    Config.withDescription("Start an embedded PostgreSQL when DATABASE_URL is unset: auto (only when nothing answers on CTXD_EMBEDDED_DB_PROBE), on, off"),
  ),
  dir: Config.string("CTXD_EMBEDDED_DB_DIR").pipe(
    Config.withDefault(EmbeddedDatabase.defaults.dir),
    Config.withDescription("Data directory of the embedded PostgreSQL"),
  ),
  probe: Config.string("CTXD_EMBEDDED_DB_PROBE").pipe(
    Config.withDefault(EmbeddedDatabase.defaults.probe),
    Config.withDescription("host:port probed for a running PostgreSQL before starting the embedded one (auto)"),
  ),
  databaseUrl: Config.string("DATABASE_URL").pipe(Config.withDefault("")),
})
