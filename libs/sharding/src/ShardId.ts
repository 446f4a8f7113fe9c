/**
 * Which shard a session belongs to, and the cluster-wide shard count.
 *
 * A session's shard is `hash(tenant + "/" + session) mod S`, where the hash
 * is the first 4 bytes of SHA-256 of the UTF-8 key read as an unsigned
 * big-endian integer. SHA-256 is well distributed for any key shape (ids
 * that differ in one character land on unrelated shards), is the same in
 * every runtime and release, and costs about a microsecond for a short key.
 * Since 2^32 is a multiple of every power of two, a power-of-two `S` (the
 * default 256) has no modulo bias at all; any other `S` a bias below 2^-24.
 *
 * `S` is fixed for the life of a cluster: changing it would move almost
 * every session to another shard while workers of both counts run. The first
 * worker to start stores it in `ctxd_cluster` ({@link claimShardCount}); a
 * worker configured with another count refuses to start.
 */
import type { Database } from "@ctxd/db"
import { Data, Effect } from "effect"
import { hash as digest } from "node:crypto"

/** The default shard count, 256. */
export const DEFAULT_SHARDS = 256

/** The largest shard count accepted, 65,536 (every worker reads and seeds one lease row per shard). */
export const MAX_SHARDS = 65_536

/** The stable 32-bit hash of a key: the first 4 bytes of SHA-256(UTF-8 `key`), unsigned big-endian. */
export const hash = (key: string): number => digest("sha256", key, "buffer").readUInt32BE(0)

/** The key a session is hashed by: `<tenant>/<session>` (`/` cannot occur in either token). */
export const key = (tenant: string, session: string): string => `${tenant}/${session}`

// the hashes of the sessions seen last (a turn asks for its session's shard a few times); cleared when full
const recent = new Map<string, number>()
const RECENT = 16_384

/** The shard of a session, in `[0, shards)`; `shards` defaults to {@link DEFAULT_SHARDS}. */
export const of = (tenant: string, session: string, shards: number = DEFAULT_SHARDS): number => {
  const k = key(tenant, session)
  let h = recent.get(k)
  if (h === undefined) {
    h = hash(k)
    if (recent.size >= RECENT) recent.clear()
    recent.set(k, h)
  }
  return h % shards
}

/** True for a usable shard count: an integer from 1 to {@link MAX_SHARDS}. */
export const isValidCount = (shards: number): boolean => Number.isInteger(shards) && shards >= 1 && shards <= MAX_SHARDS

/** This worker's shard count differs from the one the cluster was started with. */
export class ShardCountMismatch extends Data.TaggedError("ShardCountMismatch")<{
  readonly message: string
  readonly configured: number
  readonly cluster: number
}> {}

const SHARDS_KEY = "shards"

// The CTE's insert is not visible to the second SELECT of the same statement:
// at most one branch returns a row, the value this call stored or the one
// stored before. Neither does when another worker's insert committed while
// this one waited on it (DO NOTHING then, and the SELECT's snapshot predates
// that commit): the statement is run again, with a fresh snapshot.
const CLAIM = `
  WITH stored AS (
    INSERT INTO ctxd_cluster (key, value) VALUES ($1, $2)
    ON CONFLICT (key) DO NOTHING
    RETURNING value
  )
  SELECT value FROM stored
  UNION ALL
  SELECT value FROM ctxd_cluster WHERE key = $1
  LIMIT 1`

/**
 * Stores `shards` as the cluster's shard count if none is stored yet (in a
 * migrated schema), and fails with {@link ShardCountMismatch} if another
 * count is stored already.
 */
export const claimShardCount = (
  db: Database.DatabaseService,
  shards: number,
): Effect.Effect<void, ShardCountMismatch | Database.DatabaseUnavailable | Database.DatabaseError> =>
  Effect.gen(function* () {
    let rows: ReadonlyArray<{ value: string }> = []
    for (let attempt = 0; attempt < 3 && rows.length === 0; attempt++) {
      rows = (yield* db.query<{ value: string }>(CLAIM, [SHARDS_KEY, String(shards)])).rows
    }
    if (rows.length === 0) {
      return yield* Effect.dieMessage("the cluster's shard count could neither be stored nor read")
    }
    const cluster = Number(rows[0]!.value)
    if (cluster !== shards) {
      return yield* new ShardCountMismatch({
        message:
          `this cluster was started with ${cluster} shards but this worker is configured with ${shards} ` +
          `(CTXD_SHARDS); the shard count is fixed for the life of a cluster: set CTXD_SHARDS=${cluster}`,
        configured: shards,
        cluster,
      })
    }
  })
