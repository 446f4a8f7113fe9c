/**
 * The worker's configuration, read from the environment (constant case) and,
 * when `CTXD_CONFIG_FILE` names a file (`ctxd.yaml`, YAML or JSON), from its
 * environment-style keys for any key the environment does not set. Its turn
 * option sections (`defaults`, `tenants`, `agents`) are `RuntimeConfig`'s,
 * reloaded while the worker runs. `docs/configuration.md` lists every key
 * (generated from `ConfigSources`).
 */
import { AssemblerConfig, WorkspaceCache } from "@ctxd/assembler"
import { type ConfigFile, RuntimeConfig } from "@ctxd/config"
import { type CostModel, Pipeline, PriceFile, ProviderKeys } from "@ctxd/context"
import { ShardingConfig } from "@ctxd/sharding"
import type { Turn } from "@ctxd/contracts"
import { Admission, FlowControl, NatsAuth } from "@ctxd/nats"
import { Config, ConfigError, ConfigProvider, Data, Effect, Either, Layer, Option } from "effect"
import { readFileSync } from "node:fs"
import * as EmbeddedDatabase from "./EmbeddedDatabase.ts"
import * as HttpServer from "./HttpServer.ts"
import * as Pruner from "./Pruner.ts"

const int = (name: string, fallback: number, description: string) =>
  Config.integer(name).pipe(Config.withDefault(fallback), Config.withDescription(description))

/**
 * The memory knobs' environment defaults, as turn options (under a tenant's
 * and a request's own; unset: `MemoryRetrieval.defaults`): `CTXD_MEMORY`
 * (`true`/`false`; unset: retrieve while the agent has memories),
 * `CTXD_MEMORY_TOKENS`, `CTXD_MEMORY_FRACTION`, `CTXD_MEMORY_PLACEMENT`
 * (`tail`/`system`), `CTXD_LEARNINGS_FRACTION`.
 */
export const memoryOptions: Config.Config<Turn.Options> = Config.all({
  memory: Config.option(
    Config.boolean("CTXD_MEMORY").pipe(
      Config.withDescription(
        "Default memory option: true retrieves the agent's memories every turn, false never (nor learnings); unset: only while the agent (and user) has memory documents",
      ),
    ),
  ),
  memoryTokens: Config.option(
    Config.integer("CTXD_MEMORY_TOKENS").pipe(
      Config.validate({ message: "0..1000000 tokens", validation: (n) => n >= 0 && n <= 1_000_000 }),
      Config.withDescription(
        "Default memoryTokens: the memory budget in tokens; with neither this nor CTXD_MEMORY_FRACTION: the smaller of 2,200 and 15 % of the available budget; with both: the smaller",
      ),
    ),
  ),
  memoryFraction: Config.option(
    Config.number("CTXD_MEMORY_FRACTION").pipe(
      Config.validate({ message: "a fraction 0..1", validation: (n) => n >= 0 && n <= 1 }),
      Config.withDescription("Default memoryFraction: the memory budget as a share of the available budget (unset: 0.15)"),
    ),
  ),
  memoryPlacement: Config.option(
    Config.literal(
      "tail",
      "system",
    )("CTXD_MEMORY_PLACEMENT").pipe(
      Config.withDescription(
        "Default memoryPlacement: tail (after the last cache breakpoint) or system (the last system section, inside the cached prefix); unset: tail",
      ),
    ),
  ),
  learningsFraction: Config.option(
    Config.number("CTXD_LEARNINGS_FRACTION").pipe(
      Config.validate({ message: "a fraction 0..1", validation: (n) => n >= 0 && n <= 1 }),
      Config.withDescription(
        "Default learningsFraction: the learnings section's share of the available budget (at most 5 learnings; 0: none; unset: 0.05)",
      ),
    ),
  ),
}).pipe(
  Config.map((o) => {
    const out: { -readonly [K in keyof Turn.Options]?: Turn.Options[K] } = {}
    if (Option.isSome(o.memory)) out.memory = o.memory.value
    if (Option.isSome(o.memoryTokens)) out.memoryTokens = o.memoryTokens.value
    if (Option.isSome(o.memoryFraction)) out.memoryFraction = o.memoryFraction.value
    if (Option.isSome(o.memoryPlacement)) out.memoryPlacement = o.memoryPlacement.value
    if (Option.isSome(o.learningsFraction)) out.learningsFraction = o.learningsFraction.value
    return out
  }),
)

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
  // the flow-control knobs' defaults and what each limit is derived from them: FlowControl
  maxConcurrent: int("CTXD_MAX_CONCURRENT", FlowControl.defaults.maxConcurrent, "Turns handled at once by one worker"),
  commitBatch: int(
    "CTXD_COMMIT_BATCH",
    FlowControl.defaults.commitBatch,
    "Turns committed together in one statement at most (1: each alone)",
  ),
  commitStatements: int(
    "CTXD_COMMIT_STATEMENTS",
    FlowControl.defaults.commitStatements,
    "Commit statements in flight at once; commits arriving meanwhile wait and go out together",
  ),
  maxSessions: int("CTXD_SESSION_CACHE_SESSIONS", AssemblerConfig.defaults.maxSessions, "Sessions kept in memory"),
  maxMessages: int("CTXD_SESSION_CACHE_MESSAGES", AssemblerConfig.defaults.maxMessages, "Messages kept in memory over all sessions"),
  mailbox: int(
    "CTXD_SESSION_MAILBOX",
    FlowControl.defaults.mailbox,
    "Turns of one session that may wait behind the running one before Busy",
  ),
  prefixCacheBytes: int(
    "CTXD_PREFIX_CACHE_BYTES",
    AssemblerConfig.defaults.prefixCacheBytes,
    "Bytes of distinct system/tools JSON kept decoded by content hash (what {ref} requests name); 0 = off",
  ),
  forwardTimeoutMs: int("CTXD_FORWARD_TIMEOUT_MS", 5_000, "How long a turn forwarded to its shard's owner waits for the reply"),
  windowMessages: int("CTXD_WINDOW_MESSAGES", Pipeline.defaults.windowMessages, "Default minimum of recent messages in the window"),
  windowStep: int("CTXD_WINDOW_STEP", Pipeline.defaults.windowStep, "Default step of the window's cut"),
  freshTailMessages: int("CTXD_FRESH_TAIL_MESSAGES", Pipeline.defaults.freshTailMessages, "Default protected fresh tail"),
  memoryOptions,
  loopPolicy: Config.literal(
    "nudge",
    "escalate",
    "off",
  )("CTXD_LOOP_POLICY").pipe(
    Config.withDefault("nudge" as const),
    Config.withDescription("What to do when an agent loops: nudge, escalate (report only) or off"),
  ),
  memoryTools: Config.literal(
    "auto",
    "on",
    "off",
  )("CTXD_MEMORY_TOOLS").pipe(
    Config.withDefault("auto" as const),
    Config.withDescription("ctxd's memory tools: auto (offered when the agent/user has memories), on or off; options.memoryTools wins"),
  ),
  defaultToolsets: Config.array(Config.string(), "CTXD_DEFAULT_TOOLSETS").pipe(
    Config.withDefault([] as ReadonlyArray<string>),
    Config.withDescription("Toolsets sent from the start when a request does not name them (comma separated)"),
  ),
  workerId: Config.string("CTXD_WORKER_ID").pipe(
    Config.withDefault(ShardingConfig.defaultWorkerId()),
    Config.withDescription("This worker's id in the cluster, logs and health replies; unique per process start"),
  ),
  configFile: Config.string("CTXD_CONFIG_FILE").pipe(
    Config.withDefault(""),
    Config.withDescription("The configuration file (ctxd.yaml; YAML or JSON): environment keys, turn option defaults, tenants and agents"),
  ),
  tenantsFile: Config.string("CTXD_TENANTS_FILE").pipe(
    Config.withDefault(""),
    Config.withDescription("The tenants' sections in a file of their own (YAML or JSON): read and reloaded with the configuration file"),
  ),
  configDebounceMs: int(
    "CTXD_CONFIG_DEBOUNCE_MS",
    RuntimeConfig.defaults.debounceMs,
    "File events within this of each other make one reload",
  ).pipe(Config.validate({ message: "0 or more milliseconds", validation: (n) => n >= 0 })),
  configPollMs: int(
    "CTXD_CONFIG_POLL_MS",
    RuntimeConfig.defaults.pollMs,
    "How often the configuration files are re-stat'ed in case no file event came (a recreated directory)",
  ).pipe(Config.validate({ message: "at least 100 milliseconds", validation: (n) => n >= 100 })),
  logLevel: Config.string("LOG_LEVEL").pipe(Config.withDefault("info"), Config.withDescription("pino level")),
  shutdownTimeoutMs: int("CTXD_SHUTDOWN_TIMEOUT_MS", 10_000, "How long in-flight turns may take to finish at shutdown"),
  httpPort: int("CTXD_HTTP_PORT", HttpServer.defaults.port, "Port of /metrics (Prometheus), /healthz and /readyz; 0 = no HTTP server").pipe(
    Config.validate({ message: "a port number 0..65535 (0: off)", validation: (n) => n >= 0 && n <= 65535 }),
  ),
  replyRetentionSeconds: Config.string("CTXD_REPLY_RETENTION").pipe(
    Config.withDefault("24h"),
    Config.mapOrFail((text) => {
      const seconds = Pruner.parseRetention(text)
      return seconds instanceof Error ? Either.left(ConfigError.InvalidData([], seconds.message)) : Either.right(seconds)
    }),
    Config.withDescription(
      "Idempotency window: turn replies older are pruned (a retry then gets Conflict); 24h, 90m, 3600s, 3600 (seconds) or off",
    ),
  ),
  turnRetention: Config.option(
    Config.string("CTXD_TURN_RETENTION").pipe(
      Config.withDescription(
        "Turn records (id, request hash, reply marker) older are dropped with their day partition of ctxd_turns; default 7d (never below CTXD_REPLY_RETENTION, off when that is off), or off",
      ),
    ),
  ),
  pruneIntervalMs: int(
    "CTXD_PRUNE_INTERVAL_MS",
    Pruner.defaults.intervalMs,
    "Time between two runs of the pruner (expired replies, tenants' retention)",
  ),
  pruneBatch: int("CTXD_PRUNE_BATCH", Pruner.defaults.batch, "Turn replies pruned per statement (the pruner pauses between batches)").pipe(
    Config.validate({ message: "at least 1", validation: (n) => n >= 1 }),
  ),
  workspaceRoot: Config.option(
    Config.string("CTXD_WORKSPACE_ROOT").pipe(
      Config.withDescription("Directory of workspace bundles (one subdirectory of Markdown files per scope); unset: bundles off"),
    ),
  ),
  workspaceDebounceMs: int(
    "CTXD_WORKSPACE_DEBOUNCE_MS",
    WorkspaceCache.defaults.debounceMs,
    "Wait after a *.md change under the workspace root before its cached bundles are dropped",
  ),
  workspaceMaxAgeSeconds: int(
    "CTXD_WORKSPACE_MAX_AGE_SECONDS",
    WorkspaceCache.defaults.maxAgeSeconds,
    "A cached workspace bundle older than this is read again (for filesystems without reliable events; 0: never)",
  ),
  workspaceCacheEntries: int("CTXD_WORKSPACE_CACHE_ENTRIES", WorkspaceCache.defaults.maxEntries, "Workspace bundles kept in memory"),
  workspaceCacheBytes: int("CTXD_WORKSPACE_CACHE_BYTES", WorkspaceCache.defaults.maxBytes, "Bytes of workspace file text kept in memory"),
  workspacePerTenant: Config.boolean("CTXD_WORKSPACE_PER_TENANT").pipe(
    Config.withDefault(WorkspaceCache.defaults.perTenant),
    Config.withDescription(
      "Each tenant's workspace scopes under <root>/<tenant>/ (false: every tenant may name every scope under the root)",
    ),
  ),
  workspaceMaxFileBytes: int(
    "CTXD_WORKSPACE_MAX_FILE_BYTES",
    WorkspaceCache.defaults.maxFileBytes,
    "Largest workspace file read (a larger one: TooLarge)",
  ),
  httpHost: Config.string("CTXD_HTTP_HOST").pipe(
    Config.withDefault(HttpServer.defaults.host),
    Config.withDescription("Address the HTTP server binds to"),
  ),
}).pipe(
  Config.mapOrFail(({ turnRetention, ...config }) => {
    const seconds = Pruner.turnRetention(Option.getOrUndefined(turnRetention), config.replyRetentionSeconds)
    return seconds instanceof Error
      ? Either.left(ConfigError.InvalidData(["CTXD_TURN_RETENTION"], seconds.message))
      : Either.right({ ...config, turnRetentionSeconds: seconds })
  }),
)
export type WorkerConfig = Config.Config.Success<typeof WorkerConfig>

/** The workspace bundle cache's settings (`CTXD_WORKSPACE_*`); no root: bundles off. */
export const workspaceConfig = (config: WorkerConfig): WorkspaceCache.Config => ({
  root: Option.getOrUndefined(Option.filter(config.workspaceRoot, (root) => root !== "")),
  debounceMs: config.workspaceDebounceMs,
  maxAgeSeconds: config.workspaceMaxAgeSeconds,
  maxEntries: config.workspaceCacheEntries,
  maxBytes: config.workspaceCacheBytes,
  maxFileBytes: config.workspaceMaxFileBytes,
  perTenant: config.workspacePerTenant,
})

/**
 * The worker's flow limits (`FlowControl.derive`, where each derivation is
 * documented) from its knobs: `CTXD_MAX_CONCURRENT`, `CTXD_COMMIT_BATCH`,
 * `CTXD_COMMIT_STATEMENTS` and `CTXD_SESSION_MAILBOX` (in `config`),
 * `CTXD_MAX_INFLIGHT_BYTES`, `CTXD_TENANT_BYTES_PERCENT` and
 * `CTXD_TENANT_TURNS_PERCENT` (`Admission.config`, `Admission.shareConfig`).
 */
export const flowLimits = (config: WorkerConfig): Effect.Effect<FlowControl.Limits, ConfigError.ConfigError> =>
  Effect.map(Config.all([Admission.config, Admission.shareConfig]), ([maxInflightBytes, share]) =>
    FlowControl.derive({
      maxConcurrent: config.maxConcurrent,
      maxInflightBytes,
      commitBatch: config.commitBatch,
      commitStatements: config.commitStatements,
      mailbox: config.mailbox,
      tenantBytesPercent: share.bytesPercent,
      tenantTurnsPercent: share.turnsPercent,
    }),
  )

/** The turn-option default `CTXD_MEMORY_TOOLS` sets (`auto`: none, the option stays unset). */
export const memoryToolsDefault = (setting: WorkerConfig["memoryTools"]): { readonly memoryTools?: boolean } =>
  setting === "auto" ? {} : { memoryTools: setting === "on" }

/** The price file cannot be read or is not valid; the message names the file, and each problem's row and field. */
export class InvalidPricesFile extends Data.TaggedError("InvalidPricesFile")<{
  readonly message: string
  readonly file: string
}> {}

/** `CTXD_PRICES_FILE`: the JSON file of price rows {@link priceTable} reads; unset: the built-in table only. */
export const pricesFile: Config.Config<Option.Option<string>> = Config.option(
  Config.string("CTXD_PRICES_FILE").pipe(
    Config.withDescription('JSON file of model price rows over the built-in table (README, "Prices")'),
  ),
)

/**
 * The model price table the cache planner uses: `CostModel`'s built-in table,
 * under the rows of the JSON file named by `CTXD_PRICES_FILE` when it is set,
 * `{"models": [{"match": "<model-name prefix>", ...ModelPrices fields}]}`
 * (format and rules: `PriceFile`), validated at start.
 */
export const priceTable: Effect.Effect<CostModel.PriceTable, ConfigError.ConfigError | InvalidPricesFile> = Effect.gen(function* () {
  const file = yield* pricesFile
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
})

/**
 * The environment-style keys of the file named by `CTXD_CONFIG_FILE` (YAML or
 * JSON; `ConfigFile`), read once at start; none without it.
 */
export const fileKnobs: Effect.Effect<Readonly<Record<string, string>>, ConfigFile.InvalidConfigFile> = Effect.suspend(() =>
  Effect.map(RuntimeConfig.load({ configFile: process.env.CTXD_CONFIG_FILE }), (loaded) => loaded.knobs),
)

/**
 * The environment first, then the environment-style keys of the file named
 * by `CTXD_CONFIG_FILE` (e.g. `NATS_URL: nats://...`). An invalid file stops
 * the start, its message naming each key path and line.
 */
export const providerLayer: Layer.Layer<never, ConfigFile.InvalidConfigFile> = Layer.unwrapEffect(
  Effect.map(fileKnobs, (knobs) =>
    Layer.setConfigProvider(
      ConfigProvider.fromEnv().pipe(ConfigProvider.orElse(() => ConfigProvider.fromMap(new Map(Object.entries(knobs))))),
    ),
  ),
)

/** The embedded database's settings (`EmbeddedDatabase`), read before the worker starts. */
export const embeddedDatabase = Config.all({
  mode: Config.literal(
    "auto",
    "on",
    "off",
  )("CTXD_EMBEDDED_DB").pipe(
    Config.withDefault(EmbeddedDatabase.defaults.mode),
    Config.withDescription(
      "Start an embedded PostgreSQL when DATABASE_URL is unset: auto (only when nothing answers on CTXD_EMBEDDED_DB_PROBE), on, off",
    ),
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
