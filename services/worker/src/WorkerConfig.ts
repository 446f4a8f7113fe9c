/**
 * The worker's configuration, read from the environment (constant case) and,
 * when `CTXD_CONFIG_FILE` names a file (`ctxd.yaml`, YAML or JSON), from its
 * environment-style keys for any key the environment does not set. Its turn
 * option sections (`defaults`, `tenants`, `agents`) are `RuntimeConfig`'s,
 * reloaded while the worker runs. `docs/configuration.md` lists every key
 * (generated from `ConfigSources`).
 */
import { AssemblerConfig, WorkspaceCache } from "@ctxd/assembler"
import { type ConfigFile, ConfigReference, RuntimeConfig } from "@ctxd/config"
import { Pipeline, ProviderKeys } from "@ctxd/context"
import { ShardingConfig } from "@ctxd/sharding"
import { Admission, FlowControl, NatsAuth } from "@ctxd/nats"
import { Config, ConfigError, ConfigProvider, Effect, Either, Layer, Option } from "effect"
import * as EmbeddedDatabase from "./EmbeddedDatabase.ts"
import * as HttpServer from "./HttpServer.ts"
import { memoryOptions } from "./MemoryConfig.ts"
import * as Pruner from "./Pruner.ts"

export { memoryOptions } from "./MemoryConfig.ts"
export { InvalidPricesFile, pricesFile, priceTable } from "./PricesConfig.ts"

const int = (name: string, fallback: number, description: string) =>
  Config.integer(name).pipe(Config.withDefault(fallback), Config.withDescription(description))

/** Everything the worker process reads at start. */
export const WorkerConfig = Config.all({
  natsUrl: Config.string("NATS_URL").pipe(
    Config.withDefault("nats://127.0.0.1:4222"),
    Config.withDescription(
      "NATS server(s), comma separated. tls://host:port requires TLS; credentials in the URL (nats://user:password@host, nats://token@host) count as NATS_USER/NATS_PASSWORD or NATS_TOKEN and are removed from every message",
    ),
    ConfigReference.shownAs("comma-separated URLs"),
  ),
  // NATS_CREDS, NATS_NKEY_SEED, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_TLS_CA/_CERT/_KEY
  natsAuth: NatsAuth.config,
  subjectRoot: Config.string("CTXD_SUBJECT_ROOT").pipe(
    Config.withDefault("ctx"),
    Config.withDescription(
      "First token(s) of every subject: <root>.v1.turn.<tenant>.<session>; deployments with different roots can share one NATS. The client library reads it too",
    ),
  ),
  legacySubjects: Config.boolean("CTXD_LEGACY_SUBJECTS").pipe(
    Config.withDefault(true),
    Config.withDescription(
      "Also serve the tenant-less <root>.v1.summarize and <root>.v1.tokens.count for old callers. NATS permissions cannot scope a subject without a tenant: a deployment that isolates tenants sets false, leaving only the .<tenant> subjects",
    ),
  ),
  workerKeyTenants: Config.string("CTXD_WORKER_KEY_TENANTS").pipe(
    Config.withDefault("*"),
    ConfigReference.shownAs("`*`, empty or comma-separated tenant ids"),
    Config.map(ProviderKeys.parseWorkerKeyTenants),
    Config.withDescription(
      "Tenants whose provider calls (summaries, compaction, loop judge, exact counts) may use the worker's own provider keys when their section names none: * all, empty none, else comma-separated tenant ids",
    ),
  ),
  queueGroup: Config.string("CTXD_QUEUE_GROUP").pipe(
    Config.withDefault("ctxd-workers"),
    Config.withDescription("NATS queue group the workers share: each request goes to one worker of the group"),
  ),
  maxPayload: int(
    "CTXD_MAX_PAYLOAD",
    1024 * 1024,
    "Largest request accepted inline (in the NATS message itself); capped at the NATS server's max_payload (1 MiB unless raised). Larger requests travel by object store (CTXD_MAX_REQUEST_BYTES). In the client library, when set: a lower local limit",
  ).pipe(ConfigReference.shownAs("size (bytes)")),
  // the flow-control knobs' defaults and what each limit is derived from them: FlowControl
  maxConcurrent: int(
    "CTXD_MAX_CONCURRENT",
    FlowControl.defaults.maxConcurrent,
    "Turns one worker runs at once (both turn subjects together); up to 1024 more requests wait (within CTXD_MAX_INFLIGHT_BYTES), then Busy. A turn is mostly CPU on one core, so more at once only interleave; a turn frees its slot once only its commit remains. Every other flow limit is derived from this and the other flow knobs (libs/nats/src/FlowControl.ts)",
  ),
  commitBatch: int(
    "CTXD_COMMIT_BATCH",
    FlowControl.defaults.commitBatch,
    "Group commit: turns of other sessions committed together in one statement at most (1: each alone; under light load a commit goes out at once, alone). A batch Postgres refuses runs again turn by turn, so each turn gets its own outcome",
  ),
  commitStatements: int(
    "CTXD_COMMIT_STATEMENTS",
    FlowControl.defaults.commitStatements,
    "Group commit: commit statements in flight at once per worker (at least 1); commits arriving meanwhile wait and go out together in the next. Fewer: larger batches; more than 1: a slow statement does not hold every other session's commit",
  ),
  maxSessions: int(
    "CTXD_SESSION_CACHE_SESSIONS",
    AssemblerConfig.defaults.maxSessions,
    "Sessions whose history a worker keeps in memory (LRU)",
  ),
  maxMessages: int(
    "CTXD_SESSION_CACHE_MESSAGES",
    AssemblerConfig.defaults.maxMessages,
    "Messages kept in memory over all cached sessions (LRU)",
  ),
  mailbox: int(
    "CTXD_SESSION_MAILBOX",
    FlowControl.defaults.mailbox,
    "Turns of one session that may wait behind the running one; beyond that Busy",
  ),
  prefixCacheBytes: int(
    "CTXD_PREFIX_CACHE_BYTES",
    AssemblerConfig.defaults.prefixCacheBytes,
    "Distinct system and tools JSON kept decoded, normalized and hashed by content (LRU; counted in UTF-8 bytes of JSON, the decoded objects take a few times that), so an unchanged prompt and tool list cost one hash a turn; what {ref} requests name. 0: nothing cached, every ref unknown",
  ),
  forwardTimeoutMs: int(
    "CTXD_FORWARD_TIMEOUT_MS",
    5_000,
    "How long a worker that forwards a turn to its session's owner waits for the reply (then Unavailable)",
  ),
  windowMessages: int(
    "CTXD_WINDOW_MESSAGES",
    Pipeline.defaults.windowMessages,
    "Default of windowMessages: at least this many recent messages stay in the window",
  ),
  windowStep: int(
    "CTXD_WINDOW_STEP",
    Pipeline.defaults.windowStep,
    "Default of windowStep: the grid of the budget's cut (a forced cut moves at least this far, so it does not recur soon); the window's own cut moves when the cache planner says",
  ),
  freshTailMessages: int(
    "CTXD_FRESH_TAIL_MESSAGES",
    Pipeline.defaults.freshTailMessages,
    "Default of freshTailMessages: recent messages never evicted for budget",
  ),
  memoryOptions,
  loopPolicy: Config.literal(
    "nudge",
    "escalate",
    "off",
  )("CTXD_LOOP_POLICY").pipe(
    Config.withDefault("nudge" as const),
    Config.withDescription(
      "Default loop-detector policy: nudge (append a short message at the end of the context and flag the turn), escalate (flag only) or off (no detection); options.loop wins",
    ),
  ),
  memoryTools: Config.literal(
    "auto",
    "on",
    "off",
  )("CTXD_MEMORY_TOOLS").pipe(
    Config.withDefault("auto" as const),
    Config.withDescription(
      "ctxd's memory tools: auto offers them when the turn's agent/user has any memory, on always, off never; options.memoryTools wins",
    ),
  ),
  defaultToolsets: Config.array(Config.string(), "CTXD_DEFAULT_TOOLSETS").pipe(
    Config.withDefault([] as ReadonlyArray<string>),
    Config.withDescription(
      "Default of toolsets.defaults: the toolsets sent from the start when neither the tenant nor the request names them",
    ),
  ),
  workerId: Config.string("CTXD_WORKER_ID").pipe(
    Config.withDefault(ShardingConfig.defaultWorkerId()),
    Config.withDescription(
      "This worker's id in the cluster, logs, health replies and compaction leases: [A-Za-z0-9_-]{1,128}, unique per process start",
    ),
  ),
  configFile: Config.string("CTXD_CONFIG_FILE").pipe(
    Config.withDefault(""),
    Config.withDescription(
      "The configuration file ctxd.yaml (YAML or JSON; relative to the working directory): any variable of this page by its name, and the sections defaults, tenants and agents. Validated at start (an invalid file stops the worker, naming each key path and line); its sections reload when it changes",
    ),
    ConfigReference.shownAs("file path"),
  ),
  tenantsFile: Config.string("CTXD_TENANTS_FILE").pipe(
    Config.withDefault(""),
    Config.withDescription(
      "A file {<tenant>: <tenant section>} (YAML or JSON): the tenants section in a file of its own, read and reloaded with the configuration file. A tenant in both files: this file's section replaces the other's, whole",
    ),
    ConfigReference.shownAs("file path"),
  ),
  configDebounceMs: int(
    "CTXD_CONFIG_DEBOUNCE_MS",
    RuntimeConfig.defaults.debounceMs,
    "File events within this of each other make one reload of the configuration files (editors write a file in several steps)",
  ).pipe(ConfigReference.within({ min: 0 }, "0 or more milliseconds")),
  configPollMs: int(
    "CTXD_CONFIG_POLL_MS",
    RuntimeConfig.defaults.pollMs,
    "How often the configuration files are also re-stat'ed, in case no file event came (a directory deleted and recreated, a file system without events); a reload runs only when a file's target, inode, size or times changed",
  ).pipe(ConfigReference.within({ min: 100 }, "at least 100 milliseconds")),
  logLevel: Config.string("LOG_LEVEL").pipe(
    Config.withDefault("info"),
    Config.withDescription("Log level (pino; JSON lines on stdout)"),
    ConfigReference.shownAs("one of: `trace` | `debug` | `info` | `warn` | `error` | `fatal` | `silent`"),
  ),
  shutdownTimeoutMs: int(
    "CTXD_SHUTDOWN_TIMEOUT_MS",
    10_000,
    "How long in-flight turns may take to finish at shutdown (SIGTERM, SIGINT: no new turns, those in flight answered, shards released)",
  ),
  httpPort: int(
    "CTXD_HTTP_PORT",
    HttpServer.defaults.port,
    "Port of the worker's HTTP server: /metrics (Prometheus), /healthz, /readyz; 0: no HTTP server, no port opened",
  ).pipe(ConfigReference.within({ min: 0, max: 65535 }, "a port number 0..65535 (0: off)")),
  replyRetentionSeconds: Config.string("CTXD_REPLY_RETENTION").pipe(
    Config.withDefault("24h"),
    Config.mapOrFail((text) => {
      const seconds = Pruner.parseRetention(text)
      return seconds instanceof Error ? Either.left(ConfigError.InvalidData([], seconds.message)) : Either.right(seconds)
    }),
    Config.withDescription(
      "The idempotency window: a turn's stored reply is pruned this long after its commit; a retry after that is answered Conflict. off: replies kept forever",
    ),
    ConfigReference.shownAs("duration (24h, 90m, 3600s; a bare number is seconds) or off"),
  ),
  turnRetention: Config.option(
    Config.string("CTXD_TURN_RETENTION").pipe(
      Config.withDescription(
        "How long a turn's record (turn id, request hash, message range, the reply or its expiry marker) is kept: the pruner drops the day partitions of ctxd_turns whose turns are all older. A value shorter than the reply window, or set while that is off, stops the start",
      ),
      ConfigReference.shownAs("duration (as CTXD_REPLY_RETENTION) or off"),
    ),
  ),
  pruneIntervalMs: int(
    "CTXD_PRUNE_INTERVAL_MS",
    Pruner.defaults.intervalMs,
    "Time between two runs of the pruner (expired replies, then the tenants' retentionDays); each run does bounded work (CTXD_PRUNE_BATCH)",
  ),
  pruneBatch: int(
    "CTXD_PRUNE_BATCH",
    Pruner.defaults.batch,
    `Turn replies pruned per statement; the pruner pauses ${Pruner.defaults.pauseMs} ms between batches and runs at most ${Pruner.defaults.maxBatches} batches per run`,
  ).pipe(ConfigReference.within({ min: 1 }, "at least 1")),
  workspaceRoot: Config.option(
    Config.string("CTXD_WORKSPACE_ROOT").pipe(
      Config.withDescription(
        "Directory of workspace bundles, one subdirectory of Markdown files per scope. Unset or empty: bundles off (a request naming a workspace is answered BadRequest); a path that is not a directory stops the worker at start",
      ),
      ConfigReference.shownAs("directory path"),
    ),
  ),
  workspaceDebounceMs: int(
    "CTXD_WORKSPACE_DEBOUNCE_MS",
    WorkspaceCache.defaults.debounceMs,
    "A *.md change under the root drops its cached bundles this long after the first event (the events meanwhile fold into the same drop)",
  ),
  workspaceMaxAgeSeconds: int(
    "CTXD_WORKSPACE_MAX_AGE_SECONDS",
    WorkspaceCache.defaults.maxAgeSeconds,
    "A cached bundle older than this is read again whatever the watcher says (file systems without reliable events, e.g. NFS); 0: only file events refresh",
  ),
  workspaceCacheEntries: int(
    "CTXD_WORKSPACE_CACHE_ENTRIES",
    WorkspaceCache.defaults.maxEntries,
    "Workspace bundles (scope + extras) kept in memory (least recently used dropped first)",
  ),
  workspaceCacheBytes: int(
    "CTXD_WORKSPACE_CACHE_BYTES",
    WorkspaceCache.defaults.maxBytes,
    "Workspace file text kept in memory over all bundles; a bundle larger than this is read every turn",
  ),
  workspacePerTenant: Config.boolean("CTXD_WORKSPACE_PER_TENANT").pipe(
    Config.withDefault(WorkspaceCache.defaults.perTenant),
    Config.withDescription(
      "true: a tenant's workspace scopes are <root>/<tenant>/<scope>/, so a tenant cannot name another tenant's files; false: every tenant may name every scope under the root",
    ),
  ),
  workspaceMaxFileBytes: int(
    "CTXD_WORKSPACE_MAX_FILE_BYTES",
    WorkspaceCache.defaults.maxFileBytes,
    "Largest workspace file read; a larger one answers the turn TooLarge (naming the file, its size and the limit)",
  ),
  httpHost: Config.string("CTXD_HTTP_HOST").pipe(
    Config.withDefault(HttpServer.defaults.host),
    Config.withDescription("Address the HTTP server (CTXD_HTTP_PORT) binds to"),
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
      "With DATABASE_URL unset: auto starts an embedded PostgreSQL when nothing answers on CTXD_EMBEDDED_DB_PROBE, on always, off never (then DATABASE_URL's default applies). A set DATABASE_URL always wins",
    ),
  ),
  dir: Config.string("CTXD_EMBEDDED_DB_DIR").pipe(
    Config.withDefault(EmbeddedDatabase.defaults.dir),
    Config.withDescription(
      "Data directory of the embedded PostgreSQL (relative to the working directory; initdb on the first start, kept across restarts). As root, the server runs as the postgres user, which must reach it",
    ),
    ConfigReference.shownAs("directory path"),
  ),
  probe: Config.string("CTXD_EMBEDDED_DB_PROBE").pipe(
    Config.withDefault(EmbeddedDatabase.defaults.probe),
    Config.withDescription(
      `Probed (up to ${EmbeddedDatabase.defaults.probeTimeoutMs} ms) for a running PostgreSQL before the embedded one starts (CTXD_EMBEDDED_DB=auto)`,
    ),
    ConfigReference.shownAs("host:port"),
  ),
  databaseUrl: Config.string("DATABASE_URL").pipe(Config.withDefault("")),
})
