/**
 * The partitioned layout of the store (migration 10; docs/data-lifecycle.md,
 * "Scaling the store") and its upkeep:
 *
 * - `ctxd_messages`: RANGE (session_id) with the pre-partitioning table as
 *   `ctxd_messages_v1` (sessions below the cut) and `ctxd_messages_h`, HASH
 *   (session_id) in {@link defaults.hashPartitions}, for every later session.
 * - `ctxd_turns` (the stored replies, most of the bytes): RANGE (created_at),
 *   one partition per UTC day (`ctxd_turns_pYYYYMMDD`), the old table as
 *   `ctxd_turns_v1` (everything before the cut) and `ctxd_turns_default`
 *   for a day nobody created ahead.
 *
 * {@link ensureFuture} creates the next days' partitions (idempotent, safe
 * from several workers at once); {@link dropBefore} drops the day partitions
 * that end at or before a time: expiry of replies as a catalog operation
 * instead of deleting rows. {@link convert} turns a populated deployment's
 * plain tables into this layout online (see its doc).
 *
 * Every function is a no-op on a schema whose tables are not partitioned
 * (a populated deployment not converted yet), so callers need not know.
 */
import { Duration, Effect, Layer, Schedule } from "effect"
import { hash } from "node:crypto"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"

type Failure = DatabaseUnavailable | DatabaseError

export const defaults = {
  /** Day partitions of `ctxd_turns` kept created ahead of today. */
  aheadDays: 3,
  /** Hash partitions of `ctxd_messages_h` ({@link convert}; migration 10 uses 16 too). */
  hashPartitions: 16,
  /**
   * {@link convert}: session ids skipped at the cut. Sessions created while the
   * conversion validates its constraints (before the swap) must get ids below
   * the cut, so it is placed this far above the sequence.
   */
  sessionIdReserve: 1_000_000_000,
  /**
   * How long a partition drop or creation waits for its locks before giving
   * up (it is retried on the next call): below Postgres' `deadlock_timeout`
   * (1 s by default), so in a lock cycle with a turn it is upkeep that yields.
   */
  lockTimeoutMs: 500,
  /** How often a worker runs {@link ensureFuture} ({@link layerUpkeep}); it also runs once at start. */
  upkeepEvery: Duration.hours(1),
} as const

/** A partition of `ctxd_turns`: its range (`from` null for MINVALUE; both null for the default partition). */
export interface TurnPartition {
  readonly name: string
  readonly from: Date | null
  readonly to: Date | null
  /** Postgres' estimate (`reltuples`, -1 before the first ANALYZE). */
  readonly rowsEstimate: number
  readonly bytes: number
}

/** What {@link status} finds. */
export interface Status {
  readonly partitioned: boolean
  readonly turns: ReadonlyArray<TurnPartition>
}

/** The advisory lock serializing partition upkeep in `schema`. */
const upkeepKey = (schema: string): string => hash("sha1", `ctxd/partitions/${schema}`, "buffer").readBigInt64BE(0).toString()

const PARTITIONED = "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'ctxd_turns'::regclass) AS partitioned"

const TURN_PARTITIONS = `
  SELECT c.relname AS name,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']*)''\\)'))[1]::timestamptz AS "from",
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']*)''\\)'))[1]::timestamptz AS "to",
         c.reltuples::float8 AS rows_estimate,
         pg_total_relation_size(c.oid)::float8 AS bytes
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
  WHERE i.inhparent = 'ctxd_turns'::regclass
  ORDER BY 3 NULLS LAST, 2 NULLS FIRST`

/** Whether the store is partitioned, and the partitions of `ctxd_turns` by range. */
export const status: Effect.Effect<Status, Failure, Database> = Effect.gen(function* () {
  const db = yield* Database
  const { rows } = yield* db.query<{ partitioned: boolean }>(PARTITIONED)
  if (!rows[0]?.partitioned) return { partitioned: false, turns: [] }
  const parts = yield* db.query<{ name: string; from: Date | null; to: Date | null; rows_estimate: number; bytes: number }>(TURN_PARTITIONS)
  return {
    partitioned: true,
    turns: parts.rows.map((r) => ({ name: r.name, from: r.from, to: r.to, rowsEstimate: r.rows_estimate, bytes: r.bytes })),
  }
})

/**
 * Creates the day partitions of `ctxd_turns` from today (UTC) through
 * `aheadDays` days ahead that do not exist yet; returns their names. Turns of
 * a day without its partition land in `ctxd_turns_default` (never lost),
 * where only row deletes can expire them, so run this at least daily.
 * Creating a partition locks `ctxd_turns` briefly; while that lock is busy
 * (the lock timeout, {@link defaults.lockTimeoutMs}) it retries, 20 times.
 */
export const ensureFuture = (aheadDays: number = defaults.aheadDays): Effect.Effect<ReadonlyArray<string>, Failure, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    return yield* db
      .transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.query(`SET LOCAL lock_timeout = ${defaults.lockTimeoutMs}`)
          yield* tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [upkeepKey(db.schema)])
          const { rows } = yield* tx.query<{ name: string }>("SELECT ctxd_turn_partitions_ensure($1::integer) AS name", [
            Math.max(0, Math.floor(aheadDays)),
          ])
          return rows.map((r) => r.name)
        }),
      )
      .pipe(Effect.retry({ while: busy, schedule: Schedule.spaced("200 millis"), times: 20 }))
  }).pipe(Effect.withSpan("Partitions.ensureFuture"))

/** A partition {@link dropBefore} dropped. */
export interface Dropped {
  readonly name: string
  readonly to: Date
  readonly rowsEstimate: number
  readonly bytes: number
}

/**
 * Drops every range partition of `ctxd_turns` whose range ends at or before
 * `before` (day partitions, and the pre-partitioning `ctxd_turns_v1` once its
 * cut has passed); never the default partition. Each drop is its own short
 * transaction with a lock timeout, so a drop waiting behind a long reader
 * gives up instead of queueing every commit behind it (it is retried on the
 * next call). Returns what it dropped.
 *
 * The replies of the dropped turns are gone: a retry of such a turn is
 * answered as after any reply expiry (docs/data-lifecycle.md, "Replies and turn records").
 */
export const dropBefore = (before: Date): Effect.Effect<ReadonlyArray<Dropped>, Failure, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    const { turns, partitioned } = yield* status
    if (!partitioned) return []
    const expired = turns.filter((p): p is TurnPartition & { to: Date } => p.to !== null && p.to.getTime() <= before.getTime())
    const dropped: Dropped[] = []
    for (const part of expired) {
      const done = yield* db
        .transaction((tx) =>
          Effect.gen(function* () {
            yield* tx.query(`SET LOCAL lock_timeout = ${defaults.lockTimeoutMs}`)
            yield* tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [upkeepKey(db.schema)])
            const { rows } = yield* tx.query<{ exists: boolean }>("SELECT to_regclass($1) IS NOT NULL AS exists", [part.name])
            if (!rows[0]?.exists) return false
            yield* tx.query(`DROP TABLE ${quoteIdent(part.name)}`)
            return true
          }),
        )
        .pipe(
          Effect.catchIf(busy, (error) =>
            Effect.as(Effect.logWarning(`partitions: ${part.name} not dropped this time (${error.message})`), false),
          ),
        )
      if (done) dropped.push({ name: part.name, to: part.to, rowsEstimate: part.rowsEstimate, bytes: part.bytes })
    }
    if (dropped.length > 0) {
      yield* Effect.logInfo(`partitions: dropped ${dropped.map((d) => d.name).join(", ")}`)
    }
    return dropped
  }).pipe(Effect.withSpan("Partitions.dropBefore"))

const SWAP_LOCK_TIMEOUT_MS = 500

/** A lock timeout or a deadlock: the upkeep step gave way to turns and can be retried. */
const busy = (error: Failure): error is DatabaseError =>
  error._tag === "DatabaseError" && (error.code === "55P03" || error.code === "40P01")

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`

/** What {@link convert} did. */
export interface Converted {
  /** False when the tables were partitioned already (nothing done). */
  readonly converted: boolean
  /** Sessions with ids from here on keep their messages in the hash partitions. */
  readonly cutSessionId: string | null
  /** Turns created from here on go to the day partitions. */
  readonly cutAt: Date | null
  /** How long the swap took, waiting for its exclusive locks included (the only part that blocks commits). */
  readonly swapMs: number
}

/**
 * Converts a populated schema's plain `ctxd_messages` and `ctxd_turns` into
 * the partitioned layout while workers (of any release) keep serving:
 *
 * 1. `CHECK (session_id < cut)` on messages (cut: the session sequence plus
 *    {@link defaults.sessionIdReserve}) and `CHECK (created_at < cut)` on
 *    turns (cut: the start of the day after tomorrow, UTC), added NOT VALID
 *    (a brief lock, no scan) and then validated, which scans the tables
 *    under a lock that lets commits go on;
 * 2. the unique index the partitioned turns need, built CONCURRENTLY;
 * 3. `ctxd_partition_store`: one transaction that renames the tables to
 *    `_v1`, creates the partitioned parents under the old names and attaches
 *    the old tables as their first partitions. The validated CHECKs prove
 *    the partition bounds, so Postgres skips the scan: the exclusive locks
 *    are held for milliseconds.
 *
 * Run it from one place (e.g. `libs/db/scripts/partitions.ts convert`) on a
 * `Database` without a statement timeout; it can be rerun after a failure.
 */
export const convert = (
  options: { readonly hashPartitions?: number; readonly sessionIdReserve?: number } = {},
): Effect.Effect<Converted, Failure, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    const before = yield* db.query<{ partitioned: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'ctxd_messages'::regclass) AS partitioned",
    )
    if (before.rows[0]?.partitioned) return { converted: false, cutSessionId: null, cutAt: null, swapMs: 0 }
    const reserve = Math.max(1, Math.floor(options.sessionIdReserve ?? defaults.sessionIdReserve))
    const cuts = yield* db.query<{ cut_id: string; cut_at: Date }>(
      `SELECT (COALESCE(pg_sequence_last_value(pg_get_serial_sequence('ctxd_sessions', 'id')::regclass), 0) + $1::bigint)::text AS cut_id,
              date_trunc('day', now(), 'UTC') + interval '2 days' AS cut_at`,
      [reserve],
    )
    const { cut_id: cutId, cut_at: cutAt } = cuts.rows[0]!
    // 1. constraints proving the bounds; a rerun replaces those of an earlier attempt
    yield* db.query(`ALTER TABLE ctxd_messages DROP CONSTRAINT IF EXISTS ctxd_messages_v1_cut,
                       ADD CONSTRAINT ctxd_messages_v1_cut CHECK (session_id < ${BigInt(cutId).toString()}) NOT VALID`)
    yield* db.query("ALTER TABLE ctxd_messages VALIDATE CONSTRAINT ctxd_messages_v1_cut")
    yield* db.query(`ALTER TABLE ctxd_turns DROP CONSTRAINT IF EXISTS ctxd_turns_v1_cut,
                       ADD CONSTRAINT ctxd_turns_v1_cut CHECK (created_at < '${cutAt.toISOString()}'::timestamptz) NOT VALID`)
    yield* db.query("ALTER TABLE ctxd_turns VALIDATE CONSTRAINT ctxd_turns_v1_cut")
    // 2. the partitioned turns' unique key, on the old table, without blocking writes
    const invalid = yield* db.query<{ invalid: boolean }>(
      `SELECT NOT i.indisvalid AS invalid FROM pg_index i WHERE i.indexrelid = to_regclass('ctxd_turns_v1_key')`,
    )
    if (invalid.rows[0]?.invalid) yield* db.query("DROP INDEX CONCURRENTLY ctxd_turns_v1_key")
    yield* db.query("CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ctxd_turns_v1_key ON ctxd_turns (session_id, turn_id, created_at)")
    // 3. the swap, under a lock timeout below Postgres' deadlock_timeout (1 s by default): a reader
    // holding a child table while it waits for ctxd_sessions makes us give up, not it; then retry
    let swapMs = 0
    const swapped = yield* db
      .transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.query(`SET LOCAL lock_timeout = ${SWAP_LOCK_TIMEOUT_MS}`)
          const started = performance.now()
          const { rows } = yield* tx.query<{ done: boolean }>(
            "SELECT ctxd_partition_store($1::bigint, $2::timestamptz, $3::integer) AS done",
            [cutId, cutAt, Math.max(1, Math.floor(options.hashPartitions ?? defaults.hashPartitions))],
          )
          swapMs = performance.now() - started
          return rows[0]?.done === true
        }),
      )
      .pipe(
        Effect.retry({
          while: busy,
          schedule: Schedule.spaced("200 millis"),
          times: 50,
        }),
      )
    // the days after the cut; should their locks stay busy, the workers' hourly upkeep creates them
    yield* ensureFuture().pipe(
      Effect.catchIf(busy, (error) => Effect.logWarning(`partitions: next days' partitions not created yet (${error.message})`)),
    )
    yield* Effect.logInfo(`partitions: converted (swap ${swapMs.toFixed(0)} ms, sessions from ${cutId}, turns from ${cutAt.toISOString()})`)
    return { converted: swapped, cutSessionId: cutId, cutAt, swapMs }
  }).pipe(Effect.withSpan("Partitions.convert"))

/**
 * Runs {@link ensureFuture} at start and every {@link defaults.upkeepEvery}
 * for as long as the layer lives (a worker's lifetime), so day partitions
 * always exist ahead. A failure is logged and retried on the next round;
 * it never stops the worker. Expiry ({@link dropBefore}) is not scheduled
 * here: that is the retention pruner's decision.
 */
export const layerUpkeep: Layer.Layer<never, never, Database> = Layer.scopedDiscard(
  ensureFuture().pipe(
    Effect.catchAll((error) => Effect.logWarning(`partitions: could not create the next days' partitions: ${error.message}`)),
    Effect.repeat(Schedule.spaced(defaults.upkeepEvery)),
    Effect.forkScoped,
  ),
)
