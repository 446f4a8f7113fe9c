/**
 * The all-in-one worker: the turn endpoints (assembler, with sticky routing
 * by shard), the health endpoint, and everything they need, wired from
 * {@link WorkerConfig}. It joins the cluster of the workers sharing its
 * Postgres schema (membership and shard leases, `@ctxd/sharding`), so
 * `npm start` run N times forms a cluster of N. Once serving it attaches its
 * readiness checks and runtime gauges to the process's `WorkerStatus` (the
 * HTTP probes). Runs until interrupted; then it reports draining (`/readyz`
 * 503), stops taking turns, finishes the ones in flight, releases its shard
 * leases (their new owners take over at once), drains NATS and closes the
 * Postgres pool — in that order, because scopes close in reverse order of
 * acquisition.
 */
import {
  Assembler,
  AssemblerConfig,
  ClientTurn,
  CompactionPort,
  LengthHistory,
  TurnEndpoint,
  TurnMetrics,
  WorkspaceCache,
} from "@ctxd/assembler"
import { CompactEndpoint, CompactionStore, Compactor, CompactorConfig, Metrics as CompactorMetrics } from "@ctxd/compactor"
import { Llm, SummarizeEndpoint, Summarizer } from "@ctxd/summarizer"
import { type CacheMiss, ProviderKeys } from "@ctxd/context"
import { LocalCounter } from "@ctxd/tokens"
import { RuntimeConfig } from "@ctxd/config"
import { Subjects, type Turn } from "@ctxd/contracts"
import { Judge, LoopCheck } from "@ctxd/loop-detector"
import {
  Database,
  KnowledgeStore,
  LifecycleStore,
  MemoryStore,
  Migrations,
  Partitions,
  SessionLengthStore,
  SessionStore,
  UsageStore,
} from "@ctxd/db"
import { Admission, NatsClient, PayloadStore } from "@ctxd/nats"
import { ShardingConfig, ShardLeases } from "@ctxd/sharding"
import { CountEndpoint, TokenCounter, UsageEndpoint } from "@ctxd/token-counter"
import { Effect, Layer, Option } from "effect"
import { readFileSync } from "node:fs"
import * as HealthEndpoint from "./HealthEndpoint.ts"
import * as KnowledgeEndpoint from "./KnowledgeEndpoint.ts"
import * as LearnEndpoint from "./LearnEndpoint.ts"
import * as MemoryEndpoint from "./MemoryEndpoint.ts"
import * as MetricsEndpoint from "./MetricsEndpoint.ts"
import * as Pruner from "./Pruner.ts"
import * as Readiness from "./Readiness.ts"
import * as RuntimeMetrics from "./RuntimeMetrics.ts"
import * as SessionEndpoint from "./SessionEndpoint.ts"
import { flowLimits, memoryToolsDefault, priceTable, WorkerConfig, workspaceConfig } from "./WorkerConfig.ts"
import { WorkerStatus } from "./WorkerStatus.ts"

const tokenCount = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n) && n >= 0

/**
 * What the turn's report expected of the prompt cache; undefined when it has
 * no `cache.expectedReadTokens` (a reply of a worker older than the field).
 */
const cacheExpectation = (cache: Turn.Report["cache"] | undefined): UsageEndpoint.TurnEstimate["cache"] =>
  cache === undefined || !tokenCount(cache.expectedReadTokens)
    ? undefined
    : {
        expectedReadTokens: cache.expectedReadTokens,
        ...(tokenCount(cache.expectedWriteTokens) ? { expectedWriteTokens: cache.expectedWriteTokens } : {}),
        ...(cache.reason === undefined ? {} : { reason: cache.reason }),
        ...(cache.miss === undefined || !tokenCount(cache.miss.tokens) ? {} : { miss: cacheMiss(cache.miss) }),
      }

/** A stored report's `cache.miss` as the attribution reads it (an unknown cause of a newer worker: `unknown`). */
const cacheMiss = (miss: NonNullable<Turn.Report["cache"]["miss"]>): CacheMiss.Miss => ({
  cause: CAUSES.has(miss.cause) ? (miss.cause as CacheMiss.Cause) : "unknown",
  tokens: miss.tokens,
  ...(miss.reason === undefined ? {} : { reason: miss.reason }),
})
const CAUSES: ReadonlySet<string> = new Set<CacheMiss.Cause>(["ctxd_edit", "ttl_expiry", "client_change", "unknown"])

/**
 * What a usage report needs to know of the turn it bills: the estimate ctxd
 * made and how, and what it expected of the cache. One indexed read of the
 * stored reply (`ctxd_turns` by tenant, session, turn id), or, when the
 * session has no such turn, of its branches' (`ClientTurn.findTurn`: a
 * client-history turn stored in a branch, reported to the session); none
 * once the reply was pruned (past `CTXD_REPLY_RETENTION`).
 */
const usageLookup = (tenant: string, session: string, turnId: string) =>
  ClientTurn.findTurn(tenant, session, turnId).pipe(
    Effect.map(Option.filter((turn) => turn.expired !== true)),
    Effect.map(
      Option.map((turn): UsageEndpoint.TurnEstimate => {
        const { report } = turn.reply as Turn.TurnReply
        const cache = cacheExpectation(report.cache)
        return {
          model: { provider: report.model.provider, name: report.model.name },
          estimate: report.tokens.total,
          backend: report.counter.backend,
          calibration: report.counter.calibration,
          ...(cache === undefined ? {} : { cache }),
        }
      }),
    ),
  )

/** Counts a turn's usage once across all workers (`ctxd_usage_reports`). */
const usageClaim = (tenant: string, session: string, turnId: string, billed: number) =>
  Effect.flatMap(UsageStore.UsageStore, (store) => store.claim(tenant, session, turnId, billed))

/** Serves until the scope closes. */
export const serve = Effect.gen(function* () {
  const config = yield* WorkerConfig
  const nats = yield* NatsClient.NatsClient
  const subjects = Subjects.make(config.subjectRoot)
  const serverMax = nats.connection.info?.max_payload ?? config.maxPayload
  const maxPayload = Math.min(config.maxPayload, serverMax)
  if (maxPayload < config.maxPayload) {
    yield* Effect.logWarning(
      `CTXD_MAX_PAYLOAD ${config.maxPayload} is above the NATS server's max_payload ${serverMax}; using ${serverMax}`,
    )
  }
  const started = Date.now()
  const leases = yield* ShardLeases.ShardLeases
  const admission = yield* Admission.Admission
  const status = yield* WorkerStatus
  const assembler = yield* Assembler.Assembler
  const runtime = yield* RuntimeConfig.RuntimeConfig
  const configStatus = () => ({ hash: runtime.current().hash, reloads: runtime.reloads(), rejected: runtime.rejected() })
  const turns = yield* TurnEndpoint.serve({
    subjects,
    queue: config.queueGroup,
    limits: yield* flowLimits(config),
    maxPayload,
    drainTimeoutMs: config.shutdownTimeoutMs,
    forwardTimeoutMs: config.forwardTimeoutMs,
  })
  yield* LoopCheck.serve({ subject: subjects.loopCheck, queue: config.queueGroup })
  yield* KnowledgeEndpoint.serve({ subjects, queue: config.queueGroup })
  yield* MemoryEndpoint.serve({ subjects, queue: config.queueGroup })
  yield* SessionEndpoint.serve({
    subjects,
    queue: config.queueGroup,
    forwardTimeoutMs: config.forwardTimeoutMs,
    drainTimeoutMs: config.shutdownTimeoutMs,
  })
  TurnMetrics.initialize()
  yield* CompactorMetrics.initialize
  const gauges = RuntimeMetrics.refresh({
    shards: leases.status,
    mailboxDepth: assembler.mailboxDepth,
    turnsInFlight: turns.inFlight,
    bytesInFlight: admission.inFlightBytes,
  })
  yield* MetricsEndpoint.serve({ subject: subjects.metrics, workerId: config.workerId, refresh: gauges })
  yield* CountEndpoint.serve({ root: config.subjectRoot, queue: config.queueGroup, maxPayload, legacy: config.legacySubjects })
  yield* UsageEndpoint.serve({ subjects, queue: config.queueGroup, lookup: usageLookup, claim: usageClaim })
  yield* SummarizeEndpoint.serve({ root: config.subjectRoot, queue: config.queueGroup, maxPayload, legacy: config.legacySubjects })
  yield* CompactEndpoint.serve({ subjects, queue: config.queueGroup })
  yield* LearnEndpoint.serve({ subjects, queue: config.queueGroup, maxPayload })
  const compaction = yield* CompactorConfig.config
  yield* CompactEndpoint.serveJobs({ subjects, config: compaction.queue })
  yield* HealthEndpoint.serve({
    subjects,
    workerId: config.workerId,
    started,
    inFlight: turns.inFlight,
    inFlightBytes: admission.inFlightBytes,
    maxInFlightBytes: admission.maxBytes,
    draining: status.draining,
    config: configStatus,
    routing: Effect.map(leases.ownedShards, (owned) => ({
      shards: owned.length,
      turns: turns.handled(),
      forwarded: turns.forwarded(),
    })),
  })
  const checks = yield* Readiness.make({ nats, db: yield* Database.Database, leases })
  yield* status.attach({ checks, gauges, config: configStatus })
  // the last finalizer added runs first: not ready before anything stops
  yield* Effect.addFinalizer(() =>
    Effect.zipRight(status.drain, Effect.logInfo("shutting down: not ready; no new turns; finishing the ones in flight")),
  )
  const owned = (yield* leases.ownedShards).length
  yield* Effect.logInfo(
    `worker ready on ${subjects.turnWildcard} (queue ${config.queueGroup}) and ${turns.direct}.turn.>, ` +
      `owning ${owned} of ${leases.shards} shards, max payload ${maxPayload} B, ` +
      `max request bytes in flight ${admission.maxBytes}, per tenant ${admission.tenantMaxBytes} bytes and ${admission.tenantMaxTurns} turns`,
  ).pipe(Effect.annotateLogs({ worker: config.workerId }))
})

/**
 * The sharding settings from the environment (`CTXD_SHARDS`, `CTXD_LEASE_*`),
 * for this worker's id; its address defaults to its direct subject prefix
 * `<root>.v1.worker.<workerId>`.
 */
const shardingLayer = (config: WorkerConfig) =>
  Layer.effect(
    ShardingConfig.ShardingConfig,
    Effect.flatMap(ShardingConfig.config, (options) =>
      ShardingConfig.make({
        ...options,
        workerId: config.workerId,
        address: options.address ?? Subjects.make(config.subjectRoot).worker(config.workerId),
      }),
    ),
  )

/**
 * Loads the local tokenizers' vocabularies (hundreds of ms of blocking CPU
 * each) before the worker joins the cluster, so neither the first turns nor
 * the first lease renewals wait behind them.
 */
const warmUp = Layer.effectDiscard(
  Effect.flatMap(TokenCounter.TokenCounter, ({ local }) =>
    Effect.sync(() => {
      for (const encoding of ["o200k_base", "cl100k_base"] as const) local.countText("warm up", encoding)
    }),
  ),
)

/**
 * The shard leases' own two Postgres connections (same URL and schema): lease
 * renewals and heartbeats must never queue behind turns for a pool
 * connection, or a busy worker would lose its shards.
 */
const leaseDatabase = Layer.scoped(
  Database.Database,
  Effect.flatMap(Database.config, (options) => Database.make({ ...options, poolMax: 2, applicationName: "ctxd-leases" })),
)

/** Everything `serve` needs, from the environment. */
export const layer = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* WorkerConfig
    // the config file's sections (and CTXD_TENANTS_FILE's), watched: a reload applies from the next turn
    const runtimeConfig = RuntimeConfig.layer(
      { configFile: config.configFile, tenantsFile: config.tenantsFile },
      { debounceMs: config.configDebounceMs, pollMs: config.configPollMs, setByEnvironment: (key) => process.env[key] !== undefined },
    )
    const prices = yield* priceTable
    const workspace = workspaceConfig(config)
    // a bad workspace root stops the worker before it connects anywhere
    if (workspace.root !== undefined) yield* WorkspaceCache.checkRoot(workspace.root)
    const database = Database.layerConfig
    // every flow limit (turn slots, commit grouping, bytes in flight, tenant shares, mailbox) from one derivation
    const limits = yield* flowLimits(config)
    const store = SessionStore.layerWith(limits.commit).pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    const knowledge = KnowledgeStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    const memory = MemoryStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    const usage = UsageStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    const lifecycle = LifecycleStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    // expired replies and the tenants' retention; stops (scope) before the pool closes
    // (the tenants' sections read at every run: a reload of the configuration applies at the next)
    const pruner = Layer.scopedDiscard(
      Effect.flatMap(RuntimeConfig.RuntimeConfig, (runtime) =>
        Pruner.run(
          {
            ...Pruner.defaults,
            replyRetentionSeconds: config.replyRetentionSeconds,
            turnRetentionSeconds: config.turnRetentionSeconds,
            intervalMs: config.pruneIntervalMs,
            batch: config.pruneBatch,
          },
          () => runtime.current().tenants,
        ),
      ),
    ).pipe(Layer.provide(lifecycle), Layer.provide(runtimeConfig), Layer.provide(database))
    // the day partitions of ctxd_turns created ahead (a no-op on a schema not converted to partitions)
    const partitions = Partitions.layerUpkeep.pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    // the agents' histories of session lengths, cached per worker (the cache planner's expected turns)
    const lengths = LengthHistory.layer().pipe(
      Layer.provide(SessionLengthStore.layer),
      Layer.provide(Migrations.layer),
      Layer.provide(database),
    )
    // whose provider key a tenant's summaries, judge calls and exact counts use
    const keys = Layer.unwrapEffect(
      Effect.map(RuntimeConfig.RuntimeConfig, (runtime) =>
        ProviderKeys.layer({
          sections: () => runtime.current().tenants,
          workerKeyTenants: config.workerKeyTenants,
          readers: { env: (name) => process.env[name], file: (path) => readFileSync(path, "utf8") },
        }),
      ),
    ).pipe(Layer.provide(runtimeConfig))
    const tokens = TokenCounter.layerConfig.pipe(Layer.provide(keys))
    const nats = NatsClient.layer({
      servers: config.natsUrl.split(","),
      name: `ctxd-worker-${config.workerId}`,
      auth: config.natsAuth,
    })
    // bodies above the NATS max_payload (both directions) and the request byte budget of every endpoint
    const payloadConfig = yield* PayloadStore.config
    const payloads = PayloadStore.layer({
      ...payloadConfig,
      bucket: PayloadStore.bucketName(config.subjectRoot),
      mode: "create",
    }).pipe(Layer.provide(nats))
    // each tenant's share of it, and of the turn slots: one tenant's burst cannot take the whole worker;
    // a tenant's section may set its own share (`share: {turnsPercent, bytesPercent}`) over the default
    const admission = Layer.unwrapEffect(
      Effect.map(RuntimeConfig.RuntimeConfig, (runtime) =>
        Admission.layer(limits.inflightBytes, limits.tenantShare, (tenant) => {
          const own = runtime.current().tenants[tenant]?.share
          return own === undefined ? undefined : limits.shareOf(own)
        }),
      ),
    ).pipe(Layer.provide(runtimeConfig))
    // The summarizer and the compactor count with the token counter's local counter (one cache).
    const localCounter = Layer.effect(
      LocalCounter.LocalCounter,
      Effect.map(TokenCounter.TokenCounter, (service) => service.local),
    ).pipe(Layer.provide(tokens))
    const llm = Llm.layerConfig.pipe(Layer.provide(keys))
    const summarizer = Summarizer.layerConfig.pipe(Layer.provide(llm), Layer.provide(localCounter))
    const compactionStore = CompactionStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(database))
    const compactorConfig = yield* CompactorConfig.config
    const compactor = Compactor.layer(compactorConfig).pipe(
      Layer.provide(compactionStore),
      Layer.provide(store),
      Layer.provide(summarizer),
      // the provider backend's on-demand summaries go through the same clients and keys
      Layer.provide(llm),
      Layer.provide(localCounter),
    )
    const compaction = CompactionPort.layer({ root: config.subjectRoot, config: compactorConfig }).pipe(
      Layer.provide(compactor),
      Layer.provide(compactionStore),
      Layer.provide(nats),
    )
    // after the migrations (the lease tables); released when the worker stops, after the endpoints drained
    const sharding = ShardLeases.layer.pipe(
      Layer.provide(Migrations.layer),
      Layer.provide(warmUp.pipe(Layer.provide(tokens))),
      Layer.provide(shardingLayer(config)),
      Layer.provide(leaseDatabase),
    )
    // the turn options of the config file are read per turn from the current snapshot
    const assemblerConfig = Layer.unwrapEffect(
      Effect.map(RuntimeConfig.RuntimeConfig, (runtime) =>
        AssemblerConfig.layer({
          sections: runtime.current,
          maxSessions: config.maxSessions,
          maxMessages: config.maxMessages,
          defaults: {
            windowMessages: config.windowMessages,
            windowStep: config.windowStep,
            freshTailMessages: config.freshTailMessages,
            ...config.memoryOptions,
            ...memoryToolsDefault(config.memoryTools),
          },
          loop: { policy: config.loopPolicy },
          defaultToolsets: config.defaultToolsets,
          mailbox: limits.mailbox,
          prefixCacheBytes: config.prefixCacheBytes,
          prices,
        }),
      ),
    ).pipe(Layer.provide(runtimeConfig))
    // workspace bundles: files read at a miss, cached, dropped when a *.md under the root changes
    const workspaces = WorkspaceCache.layer(workspace)
    const assembler = Assembler.Assembler.Default.pipe(
      Layer.provide(tokens),
      Layer.provide(workspaces),
      Layer.provide(assemblerConfig),
      Layer.provide(store),
      Layer.provide(knowledge),
      Layer.provide(memory),
      Layer.provide(lengths),
      Layer.provide(compaction),
      Layer.provide(Judge.layer.pipe(Layer.provide(llm))),
      Layer.provide(sharding),
    )
    return Layer.mergeAll(
      assembler,
      sharding,
      tokens,
      store,
      knowledge,
      memory,
      usage,
      lifecycle,
      pruner,
      partitions,
      database,
      summarizer,
      compactor,
      nats,
      payloads,
      admission,
      runtimeConfig,
    )
  }),
)
