/**
 * Postgres as an Effect service: one `pg.Pool` per layer, opened when the
 * layer is built (the schema is created then, so an unreachable database
 * fails the build with {@link DatabaseUnavailable}) and closed, bounded in
 * time, when its scope closes.
 *
 * Every connection of the pool runs with `search_path` set to the configured
 * schema (sent in the startup packet, no extra round trip), so tests and
 * tenants of a shared database can each use their own schema.
 *
 * A `Context.Tag` rather than an `Effect.Service` so that tests and tools can
 * build it from explicit options ({@link layer}) as well as from the
 * environment ({@link layerConfig}).
 *
 * Inside a trace every statement is a client span `db.query` named by its
 * prepared statement's name or its first keyword (`SELECT`, `BEGIN`...);
 * never the parameters.
 *
 * TLS follows libpq ({@link connectionUrl}): `sslmode` (`disable`, `prefer`,
 * `require`, `verify-ca`, `verify-full`), `sslrootcert`, `sslcert` and
 * `sslkey` in the URL, or `PGSSLMODE` / `PGSSLROOTCERT` when the URL does not
 * say. The password (in the URL, or `PGPASSWORD`) is held `Redacted` and
 * appears in no message.
 */
import * as ConfigReference from "@ctxd/config/ConfigReference"
import { Config, type ConfigError, Context, Effect, Exit, Layer, Redacted, Runtime, type Scope } from "effect"
import { Spans } from "@ctxd/observe"
import pg from "pg"
import { classify, DatabaseError, DatabaseUnavailable } from "./internal/dbErrors.ts"

export { classify, DatabaseError, DatabaseUnavailable }

/** The rows of a statement and how many rows it touched. */
export interface QueryResult<Row> {
  readonly rows: ReadonlyArray<Row>
  readonly rowCount: number
}

/**
 * A named prepared statement ({@link prepared}): each connection has Postgres
 * parse and plan `text` the first time it runs it, then only binds and
 * executes it by `name`.
 */
export interface Prepared {
  readonly name: string
  readonly text: string
}

/**
 * A statement for the hot path. `name` must be unique in the process (two
 * texts under one name fail on a connection that prepared the other), and
 * the columns `text` returns must not change under live connections: a
 * statement prepared before a migration that changes them fails with
 * `cached plan must not change result type`.
 */
export const prepared = (name: string, text: string): Prepared => ({ name, text })

/** Something statements can be sent to: the pool, or one transaction's connection. */
export interface Queryable {
  /**
   * Runs one statement. With `params`, `$1`... placeholders are bound (JSON
   * values must be passed as strings: pg turns JS arrays into Postgres arrays;
   * a `Buffer` is sent as binary `bytea`). Without, the simple protocol is
   * used, so a string `sql` may hold several statements. A {@link Prepared}
   * statement always uses the extended protocol, prepared once per connection.
   */
  readonly query: <Row = Record<string, unknown>>(
    sql: string | Prepared,
    params?: ReadonlyArray<unknown>,
  ) => Effect.Effect<QueryResult<Row>, DatabaseUnavailable | DatabaseError>
}

/** Connection counts of the pool. */
export interface PoolStats {
  readonly total: number
  readonly idle: number
  readonly waiting: number
}

/** The service. */
export interface DatabaseService extends Queryable {
  /** The schema every connection uses. */
  readonly schema: string
  /**
   * Runs `f` in a transaction on one connection: `BEGIN`, then `COMMIT` if
   * `f` succeeds. If it fails, `ROLLBACK` (bounded to 5 s)
   * and the connection goes back to the pool; if it is interrupted, its
   * backend is terminated (so a running statement stops holding locks) and
   * the connection destroyed; if the rollback fails, the connection is
   * destroyed (Postgres aborts the transaction when it closes). The connection
   * is never leaked.
   */
  readonly transaction: <A, E, R>(
    f: (tx: Queryable) => Effect.Effect<A, E, R>,
  ) => Effect.Effect<A, E | DatabaseUnavailable | DatabaseError, R>
  readonly poolStats: () => PoolStats
}

/** The Postgres pool of this process. */
export class Database extends Context.Tag("@ctxd/db/Database")<Database, DatabaseService>() {}

/** How to connect. */
export interface DatabaseOptions {
  /** A `postgresql://` URL. */
  readonly url: string | Redacted.Redacted<string>
  /**
   * Schema for every connection's `search_path`, created if missing: lowercase
   * letters, digits and `_`; default `public`.
   */
  readonly schema?: string
  /** Pool size; default 10. */
  readonly poolMax?: number
  /** How long opening a connection may take; default 5,000 ms. */
  readonly connectTimeoutMs?: number
  /** Postgres `statement_timeout` per statement, 0 for none; default 30,000 ms. */
  readonly statementTimeoutMs?: number
  /** Idle connections are closed after this; default 10,000 ms. */
  readonly idleTimeoutMs?: number
  /** How long closing the pool may take when the scope closes; default 5,000 ms. */
  readonly closeTimeoutMs?: number
  /** `application_name` shown in `pg_stat_activity`; default `ctxd`. */
  readonly applicationName?: string
}

// Cleanup after a failed or interrupted transaction is quick unless the connection is broken.
const CLEANUP_TIMEOUT_MS = 5_000

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/** True for a schema name {@link make} accepts (lowercase, so it needs no quoting anywhere). */
export const isSchemaName = (name: string): boolean => SCHEMA_NAME.test(name)

/** What a statement's span is called by: its prepared name, else its first keyword. */
const summaryOf = (sql: string | Prepared): string =>
  typeof sql !== "string" ? sql.name : (/^\s*([A-Za-z]+)/.exec(sql)?.[1] ?? "SQL").toUpperCase()

const queryable = (target: pg.Pool | pg.PoolClient, schema: string): Queryable => ({
  query: <Row = Record<string, unknown>>(sql: string | Prepared, params?: ReadonlyArray<unknown>) =>
    Effect.tryPromise({
      try: () =>
        typeof sql !== "string"
          ? target.query({ name: sql.name, text: sql.text, values: (params ?? []) as Array<unknown> })
          : params === undefined
            ? target.query(sql)
            : target.query(sql, params as Array<unknown>),
      catch: classify,
    }).pipe(
      Effect.map((result): QueryResult<Row> => ({ rows: result.rows as Array<Row>, rowCount: result.rowCount ?? 0 })),
      Spans.child("db.query", {
        kind: "client",
        attributes: { "db.system.name": "postgresql", "db.namespace": schema, "db.query.summary": summaryOf(sql) },
      }),
    ),
})

/**
 * The connection string the pool uses: `url` with libpq's TLS variables
 * added when it does not set them (`PGSSLMODE` as `sslmode`, `PGSSLROOTCERT`
 * as `sslrootcert` unless TLS is off), and, when it has an `sslmode`,
 * `uselibpqcompat=true` so `sslmode` means what it means to libpq and psql:
 * `prefer` and `require` encrypt without verifying the server (`require` with
 * a root certificate verifies it like `verify-ca`), `verify-ca` checks the
 * chain against `sslrootcert`, `verify-full` also the host name. Unlike
 * libpq, `prefer` does not fall back to a plain connection: use `disable`
 * for a server without TLS. A URL that is not `postgres[ql]://` is left as is.
 */
export const connectionUrl = (url: string, env: Readonly<Record<string, string | undefined>> = process.env): string => {
  if (!/^postgres(ql)?:\/\//i.test(url)) return url
  const query = url.includes("?") ? url.slice(url.indexOf("?") + 1) : ""
  const params = new URLSearchParams(query)
  const extra: Array<[string, string]> = []
  const mode = params.get("sslmode") ?? (env.PGSSLMODE === undefined || env.PGSSLMODE === "" ? undefined : env.PGSSLMODE)
  if (!params.has("sslmode") && mode !== undefined) extra.push(["sslmode", mode])
  const rootCert = env.PGSSLROOTCERT
  if (!params.has("sslrootcert") && rootCert !== undefined && rootCert !== "" && mode !== undefined && mode !== "disable") {
    extra.push(["sslrootcert", rootCert])
  }
  if (mode !== undefined && !params.has("uselibpqcompat")) extra.push(["uselibpqcompat", "true"])
  if (extra.length === 0) return url
  const added = extra.map(([key, value]) => `${key}=${encodeURIComponent(value)}`).join("&")
  return `${url}${url.includes("?") ? (url.endsWith("?") || url.endsWith("&") ? "" : "&") : "?"}${added}`
}

/**
 * The TLS options pg will use for `url` (`false`: none; an object: TLS with
 * these `tls.connect` options), or why the URL is unusable (an unreadable
 * `sslrootcert`, `verify-ca` without one, a malformed URL): a
 * {@link DatabaseError} whose message never holds the URL or its password.
 */
export const tlsOf = (url: string): Effect.Effect<false | Readonly<Record<string, unknown>>, DatabaseError> =>
  Effect.try({
    try: () => {
      const ssl: unknown = (new pg.Client({ connectionString: url }) as unknown as { connectionParameters: { ssl: unknown } })
        .connectionParameters.ssl
      return ssl === false || ssl === undefined || ssl === null
        ? (false as const)
        : ssl === true
          ? {}
          : (ssl as Readonly<Record<string, unknown>>)
    },
    catch: (error) =>
      new DatabaseError({
        message: `DATABASE_URL is not usable: ${error instanceof Error ? error.message : "invalid connection string"}`,
      }),
  })

/** Opens the pool and creates the schema; the pool closes with the scope. */
export const make = (options: DatabaseOptions): Effect.Effect<DatabaseService, DatabaseUnavailable | DatabaseError, Scope.Scope> =>
  Effect.gen(function* () {
    const schema = options.schema ?? "public"
    if (!isSchemaName(schema)) {
      return yield* new DatabaseError({
        message: `invalid schema name ${JSON.stringify(schema)}: use lowercase letters, digits and _ (at most 63)`,
      })
    }
    const statementTimeoutMs = options.statementTimeoutMs ?? 30_000
    const url = connectionUrl(Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url)
    // a bad sslmode, an unreadable sslrootcert... fail here, clearly, not inside every connection attempt
    yield* tlsOf(url)
    const runtime = yield* Effect.runtime<never>()
    // Called from pg's event emitters, outside any fiber: log synchronously.
    const logWarning = (message: string, error: unknown) =>
      Runtime.runSync(runtime)(
        Effect.logWarning(message).pipe(
          Effect.annotateLogs({ error: error instanceof Error ? error.message : String(error) }),
          Effect.catchAllCause(() => Effect.void),
        ),
      )

    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new pg.Pool({
          connectionString: url,
          max: options.poolMax ?? 10,
          connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
          idleTimeoutMillis: options.idleTimeoutMs ?? 10_000,
          application_name: options.applicationName ?? "ctxd",
          options: `-c search_path=${schema}`,
          ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
        })
        // An idle connection that dies emits here; unhandled, it would crash the process.
        pool.on("error", (error) => logWarning("postgres: idle connection failed", error))
        return pool
      }),
      (pool) =>
        Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(options.closeTimeoutMs ?? 5_000), Effect.ignore),
    )

    const onPool = queryable(pool, schema)

    // Look before creating: CREATE SCHEMA needs the CREATE privilege on the
    // database even when the schema exists, which a production role may lack.
    const existing = yield* onPool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])
    if (existing.rowCount === 0) {
      yield* onPool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).pipe(
        Effect.catchIf(
          // two processes creating it at once: the loser sees a duplicate
          (error) => error._tag === "DatabaseError" && (error.code === "42P06" || error.code === "23505"),
          () => Effect.void,
        ),
      )
    }

    const checkout = Effect.tryPromise({ try: () => pool.connect(), catch: classify }).pipe(
      Effect.map((client) => {
        // A checked-out client has no pool listener: an error event without one would crash the process.
        const onError = (error: Error) => logWarning("postgres: connection failed during a transaction", error)
        client.on("error", onError)
        return { client, onError }
      }),
    )

    const checkin = (
      { client, onError }: { readonly client: pg.PoolClient; readonly onError: (error: Error) => void },
      exit: Exit.Exit<unknown, unknown>,
    ): Effect.Effect<void> => {
      const give = (destroy: boolean) =>
        Effect.sync(() => {
          client.removeListener("error", onError)
          client.release(destroy)
        })
      if (Exit.isSuccess(exit)) return give(false)
      if (Exit.isInterrupted(exit)) {
        // A statement may still be running and holding row locks (a session's,
        // say) until it ends; closing our socket is not noticed before then.
        // Terminate the backend first (its pid cannot be reused while we hold
        // the connection), then drop the connection.
        const pid: unknown = (client as unknown as { readonly processID?: unknown }).processID
        const terminate =
          typeof pid === "number"
            ? onPool.query("SELECT pg_terminate_backend($1)", [pid]).pipe(Effect.timeout(CLEANUP_TIMEOUT_MS), Effect.ignore)
            : Effect.void
        return Effect.zipRight(terminate, give(true))
      }
      return queryable(client, schema)
        .query("ROLLBACK")
        .pipe(Effect.timeout(CLEANUP_TIMEOUT_MS), Effect.matchEffect({ onSuccess: () => give(false), onFailure: () => give(true) }))
    }

    const transaction = <A, E, R>(f: (tx: Queryable) => Effect.Effect<A, E, R>) =>
      Effect.acquireUseRelease(
        checkout,
        ({ client }) => {
          const tx = queryable(client, schema)
          return tx.query("BEGIN").pipe(
            Effect.zipRight(f(tx)),
            Effect.tap(() => tx.query("COMMIT")),
          )
        },
        checkin,
      ).pipe(Spans.child("db.transaction", { kind: "client", attributes: { "db.system.name": "postgresql", "db.namespace": schema } }))

    return {
      schema,
      query: onPool.query,
      transaction,
      poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    } satisfies DatabaseService
  })

/** The pool for explicit options. */
export const layer = (options: DatabaseOptions): Layer.Layer<Database, DatabaseUnavailable | DatabaseError> =>
  Layer.scoped(Database, make(options))

/**
 * Options from the environment: `DATABASE_URL` (default
 * `postgresql://postgres@127.0.0.1:5432/postgres`; TLS: {@link connectionUrl}), `CTXD_DB_SCHEMA` (default
 * `public`), `CTXD_DB_POOL_MAX` (default 10), `CTXD_DB_CONNECT_TIMEOUT_MS`
 * (default 5,000) and `CTXD_DB_STATEMENT_TIMEOUT_MS` (default 30,000).
 */
export const config: Config.Config<DatabaseOptions> = Config.all({
  url: Config.redacted("DATABASE_URL").pipe(
    Config.withDescription(
      "Postgres connection string (the password, here or in PGPASSWORD, is never logged). TLS as libpq reads sslmode: disable; prefer and require encrypt without verifying the server (prefer does not fall back to plain, and require against a server without TLS stops the start; require with sslrootcert verifies the chain); verify-ca checks the chain against sslrootcert, verify-full also the host name; sslcert and sslkey give a client certificate",
    ),
    ConfigReference.shownAs("URL"),
    Config.withDefault(Redacted.make("postgresql://postgres@127.0.0.1:5432/postgres")),
  ),
  schema: Config.string("CTXD_DB_SCHEMA").pipe(
    Config.validate({
      message: "lowercase letters, digits and _ (at most 63), not starting with a digit",
      validation: isSchemaName,
    }),
    Config.withDescription(
      "Postgres schema holding ctxd's tables, the search_path of every connection: lowercase letters, digits and _ (at most 63, not starting with a digit); created if missing, migrations run at start",
    ),
    Config.withDefault("public"),
  ),
  poolMax: Config.integer("CTXD_DB_POOL_MAX").pipe(
    ConfigReference.within({ min: 1 }, "must be at least 1"),
    Config.withDescription("Postgres connections per process (a worker opens 2 more of its own for shard leases and heartbeats)"),
    Config.withDefault(10),
  ),
  connectTimeoutMs: Config.integer("CTXD_DB_CONNECT_TIMEOUT_MS").pipe(
    Config.withDescription("How long opening a Postgres connection may take; then the turn answers Unavailable"),
    Config.withDefault(5_000),
  ),
  statementTimeoutMs: Config.integer("CTXD_DB_STATEMENT_TIMEOUT_MS").pipe(
    Config.withDescription("Postgres statement_timeout of every connection; 0: none"),
    Config.withDefault(30_000),
  ),
})

/** The pool configured by {@link config}. */
export const layerConfig: Layer.Layer<Database, ConfigError.ConfigError | DatabaseUnavailable | DatabaseError> = Layer.scoped(
  Database,
  Effect.flatMap(config, make),
)
