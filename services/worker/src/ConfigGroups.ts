/**
 * The sections of the configuration reference, in the order a user looks
 * for things: each variable is in exactly one (`ConfigReferencePage` refuses
 * to render a variable no section names, or a name no code reads).
 */

/** One section of the environment variables. */
export interface Group {
  readonly title: string
  /** One or two sentences above the table. */
  readonly intro: string
  readonly names: ReadonlyArray<string>
}

export const groups: ReadonlyArray<Group> = [
  {
    title: "Configuration files",
    intro: "Where the rest of the configuration comes from, and how the worker follows its changes (see [Hot reload](#hot-reload) above).",
    names: ["CTXD_CONFIG_FILE", "CTXD_TENANTS_FILE", "CTXD_CONFIG_DEBOUNCE_MS", "CTXD_CONFIG_POLL_MS"],
  },
  {
    title: "Connection: NATS",
    intro:
      "The NATS servers (with JetStream) and the subjects the workers serve; authentication and TLS are under [Security](#security). At start the worker retries an unreachable NATS or Postgres for 60 s, then stops.",
    names: ["NATS_URL", "NATS_NAME", "CTXD_SUBJECT_ROOT", "CTXD_QUEUE_GROUP"],
  },
  {
    title: "Connection: Postgres",
    intro:
      "The store. With `DATABASE_URL` unset and nothing listening on `127.0.0.1:5432`, the worker starts an embedded PostgreSQL of its own (`CTXD_EMBEDDED_DB`).",
    names: [
      "DATABASE_URL",
      "PGPASSWORD",
      "PGSSLMODE",
      "PGSSLROOTCERT",
      "CTXD_DB_SCHEMA",
      "CTXD_DB_POOL_MAX",
      "CTXD_DB_CONNECT_TIMEOUT_MS",
      "CTXD_DB_STATEMENT_TIMEOUT_MS",
      "CTXD_EMBEDDED_DB",
      "CTXD_EMBEDDED_DB_DIR",
      "CTXD_EMBEDDED_DB_PROBE",
    ],
  },
  {
    title: "Security",
    intro:
      "NATS credentials and TLS (at most one kind of credential; secrets are never logged), the tenant-less subjects, and whose turns may spend the worker's own provider keys.",
    names: [
      "NATS_CREDS",
      "NATS_NKEY_SEED",
      "NATS_USER",
      "NATS_PASSWORD",
      "NATS_TOKEN",
      "NATS_TLS_CA",
      "NATS_TLS_CERT",
      "NATS_TLS_KEY",
      "CTXD_LEGACY_SUBJECTS",
      "CTXD_WORKER_KEY_TENANTS",
    ],
  },
  {
    title: "Limits and flow control",
    intro:
      "How much one worker takes on. The flow limits are derived from these knobs in one place, [`FlowControl`](../libs/nats/src/FlowControl.ts); a request over a limit is answered `Busy` (retryable) at once.",
    names: [
      "CTXD_MAX_CONCURRENT",
      "CTXD_MAX_INFLIGHT_BYTES",
      "CTXD_TENANT_BYTES_PERCENT",
      "CTXD_TENANT_TURNS_PERCENT",
      "CTXD_SESSION_MAILBOX",
      "CTXD_COMMIT_BATCH",
      "CTXD_COMMIT_STATEMENTS",
      "CTXD_MAX_PAYLOAD",
      "CTXD_MAX_REQUEST_BYTES",
      "CTXD_PAYLOAD_TTL_MS",
      "CTXD_PAYLOAD_STORE_MAX_BYTES",
      "CTXD_FORWARD_TIMEOUT_MS",
      "CTXD_SHUTDOWN_TIMEOUT_MS",
    ],
  },
  {
    title: "Cluster: shards and leases",
    intro: "How the workers share the sessions: each session hashes to a shard, each shard is leased to one worker.",
    names: ["CTXD_WORKER_ID", "CTXD_WORKER_ADDRESS", "CTXD_SHARDS", "CTXD_LEASE_TTL_MS", "CTXD_LEASE_REFRESH_MS", "CTXD_LEASE_MARGIN_MS"],
  },
  {
    title: "Context window defaults",
    intro:
      "The environment's defaults of turn options; `ctxd.yaml`'s `defaults`, a tenant's or agent's section and the request's `options` override them (and reload live).",
    names: ["CTXD_WINDOW_MESSAGES", "CTXD_WINDOW_STEP", "CTXD_FRESH_TAIL_MESSAGES", "CTXD_LOOP_POLICY", "CTXD_DEFAULT_TOOLSETS"],
  },
  {
    title: "Caches and prices",
    intro: "What a worker keeps in memory between turns, and the model prices the cache planner weighs every edit with.",
    names: ["CTXD_SESSION_CACHE_SESSIONS", "CTXD_SESSION_CACHE_MESSAGES", "CTXD_PREFIX_CACHE_BYTES", "CTXD_PRICES_FILE"],
  },
  {
    title: "Token counting and provider keys",
    intro:
      "Who counts a prompt's tokens, and the provider endpoints and keys the exact counters, the summarizer and the loop judge use (a tenant's own keys, `providers` in its section, come first).",
    names: [
      "CTXD_TOKEN_BACKEND",
      "CTXD_TOKENIZER",
      "CTXD_TOKEN_CACHE_SIZE",
      "CTXD_TOKEN_TIMEOUT_MS",
      "CTXD_TOKEN_MAX_IN_FLIGHT",
      "CTXD_TOKEN_BREAKER_FAILURES",
      "CTXD_TOKEN_BREAKER_OPEN_MS",
      "CTXD_TOKEN_BREAKER_MAX_OPEN_MS",
      "CTXD_TOKEN_CALIBRATION",
      "CTXD_TOKEN_CALIBRATION_ALPHA",
      "CTXD_TOKEN_CALIBRATION_PRIOR_TENANTS",
      "CTXD_TOKEN_CALIBRATION_TENANT_FACTORS",
      "CTXD_TOKEN_MAX_MODELS",
      "ANTHROPIC_BASE_URL",
      "ANTHROPIC_API_KEY",
      "ANTHROPIC_AUTH_TOKEN",
      "OPENAI_BASE_URL",
      "OPENAI_API_KEY",
      "GOOGLE_GEMINI_BASE_URL",
      "GEMINI_API_KEY",
      "GOOGLE_API_KEY",
    ],
  },
  {
    title: "Compaction and summaries",
    intro:
      "When a session's history is folded into a summary, how the jobs queue (a JetStream work queue), and the model that writes the summaries.",
    names: [
      "CTXD_COMPACT_SOFT_PCT",
      "CTXD_COMPACT_AT_PCT",
      "CTXD_COMPACT_TAIL_KEEP_TOKENS",
      "CTXD_COMPACT_TAIL_MAX_PCT",
      "CTXD_COMPACT_MIN_FOLD_PCT",
      "CTXD_COMPACT_LEASE_TTL_MS",
      "CTXD_COMPACT_COOLDOWN_MS",
      "CTXD_COMPACT_COOLDOWN_FAILURES",
      "CTXD_COMPACT_STREAM",
      "CTXD_COMPACT_CONSUMER",
      "CTXD_COMPACT_ACK_WAIT_MS",
      "CTXD_COMPACT_MAX_DELIVER",
      "CTXD_COMPACT_DUPLICATE_WINDOW_MS",
      "CTXD_COMPACT_MAX_AGE_MS",
      "CTXD_COMPACT_CONCURRENCY",
      "CTXD_COMPACT_STORAGE",
      "CTXD_SUMMARIZER_MODEL",
      "CTXD_SUMMARIZER_PROVIDER",
      "CTXD_SUMMARIZER_BASE_URL",
      "CTXD_SUMMARIZER_API_KEY",
      "CTXD_SUMMARIZER_MODE",
      "CTXD_SUMMARIZER_BULLETS",
      "CTXD_SUMMARIZER_TOOL_RESULT_MAX_PCT",
      "CTXD_SUMMARIZER_CONTEXT_WINDOW",
      "CTXD_SUMMARIZER_MAX_OUTPUT_TOKENS",
      "CTXD_SUMMARIZER_SAFETY_MARGIN",
      "CTXD_SUMMARIZER_MAX_DEPTH",
      "CTXD_SUMMARIZER_TIMEOUT_MS",
      "CTXD_SUMMARIZER_RETRIES",
      "CTXD_SUMMARIZER_RETRY_BASE_MS",
    ],
  },
  {
    title: "Memory",
    intro: "The environment's defaults of the memory turn options, and ctxd's memory tools.",
    names: [
      "CTXD_MEMORY",
      "CTXD_MEMORY_TOKENS",
      "CTXD_MEMORY_FRACTION",
      "CTXD_MEMORY_PLACEMENT",
      "CTXD_LEARNINGS_FRACTION",
      "CTXD_MEMORY_TOOLS",
    ],
  },
  {
    title: "Workspace bundles",
    intro: "Markdown files on disk a request can name as its system prompt (`system: {workspace}`), read once and cached.",
    names: [
      "CTXD_WORKSPACE_ROOT",
      "CTXD_WORKSPACE_PER_TENANT",
      "CTXD_WORKSPACE_DEBOUNCE_MS",
      "CTXD_WORKSPACE_MAX_AGE_SECONDS",
      "CTXD_WORKSPACE_CACHE_ENTRIES",
      "CTXD_WORKSPACE_CACHE_BYTES",
      "CTXD_WORKSPACE_MAX_FILE_BYTES",
    ],
  },
  {
    title: "Data retention",
    intro: "What the worker's pruner deletes and when (a tenant's `retentionDays` deletes its idle sessions).",
    names: ["CTXD_REPLY_RETENTION", "CTXD_TURN_RETENTION", "CTXD_PRUNE_INTERVAL_MS", "CTXD_PRUNE_BATCH"],
  },
  {
    title: "Observability",
    intro: "Logs, the HTTP server of `/metrics`, `/healthz` and `/readyz`, and OpenTelemetry traces.",
    names: [
      "LOG_LEVEL",
      "CTXD_HTTP_PORT",
      "CTXD_HTTP_HOST",
      "OTEL_SERVICE_NAME",
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      "OTEL_SDK_DISABLED",
      "OTEL_EXPORTER_OTLP_HEADERS",
      "OTEL_RESOURCE_ATTRIBUTES",
      "OTEL_TRACES_SAMPLER",
      "OTEL_TRACES_SAMPLER_ARG",
      "OTEL_BSP_SCHEDULE_DELAY",
      "OTEL_BSP_MAX_QUEUE_SIZE",
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    ],
  },
  {
    title: "Gateway",
    intro:
      "Read by `ctxd gateway` at start (the providers' APIs in front of ctxd, [docs/gateway.md](gateway.md)); what it does per request is the [`gateway` section](#gateway-section), reloaded live. Clients are pointed at it with `ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL` and `GOOGLE_GEMINI_BASE_URL` in their own environment; the gateway never reads those for its upstreams.",
    names: [
      "CTXD_GATEWAY_HOST",
      "CTXD_GATEWAY_PORT",
      "CTXD_GATEWAY_FLEET",
      "CTXD_GATEWAY_UPSTREAM_ANTHROPIC",
      "CTXD_GATEWAY_UPSTREAM_OPENAI",
      "CTXD_GATEWAY_UPSTREAM_GOOGLE",
      "CTXD_GATEWAY_SHADOW_FILE",
    ],
  },
  {
    title: "Client library",
    intro:
      'Read by `ContextClient.layerConfig` (`libs/client`) in the caller\'s process, not by the worker; it also reads `CTXD_SUBJECT_ROOT`, `CTXD_MAX_PAYLOAD`, `CTXD_MAX_REQUEST_BYTES` and, with `auth: "env"`, the `NATS_*` credentials. The largest reply body it fetches is the option `maxReplyBytes` (256 MiB), not a variable.',
    names: ["CTXD_CLIENT_TIMEOUT_MS", "CTXD_CLIENT_RETRY_FOR_MS", "CTXD_CLIENT_REFS"],
  },
]

/** The names no group lists and the names a group lists that are not in `names`, for the page and its test. */
export const unplaced = (
  names: ReadonlyArray<string>,
): { readonly ungrouped: ReadonlyArray<string>; readonly unknown: ReadonlyArray<string> } => {
  const grouped = groups.flatMap((g) => g.names)
  return { ungrouped: names.filter((n) => !grouped.includes(n)), unknown: grouped.filter((n) => !names.includes(n)) }
}
