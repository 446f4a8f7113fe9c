/**
 * The statements of membership and shard leases. Every time is the database
 * clock's `now()`; durations are passed in milliseconds. Multi-row updates
 * lock their rows in shard (or id) order first, so two workers updating
 * overlapping rows wait for each other instead of deadlocking.
 */

/** $1 id, $2 address: register or heartbeat (a row pruned while we were cut off comes back). */
export const HEARTBEAT = `
  INSERT INTO ctxd_workers (id, address) VALUES ($1, $2)
  ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, heartbeat_at = now()`

/** $1 ms: forget workers silent for that long; rows another worker is pruning are skipped. */
export const PRUNE = `
  DELETE FROM ctxd_workers WHERE id IN (
    SELECT id FROM ctxd_workers
    WHERE heartbeat_at < now() - $1::integer * interval '1 millisecond'
    ORDER BY id FOR UPDATE SKIP LOCKED
  )`

/** $1 id */
export const DEREGISTER = `DELETE FROM ctxd_workers WHERE id = $1`

/** $1 ms: the workers that heartbeated within the TTL. */
export const LIVE = `
  SELECT id, address FROM ctxd_workers
  WHERE heartbeat_at > now() - $1::integer * interval '1 millisecond'
  ORDER BY id`

/** $1 shard count: one lease row per shard, unowned. */
export const SEED = `
  INSERT INTO ctxd_shard_leases (shard) SELECT generate_series(0, $1::integer - 1)
  ON CONFLICT (shard) DO NOTHING`

/**
 * $1 owner, $2 shards to keep (integer[]): releases every other lease `$1`
 * holds, at once (expires now, so the next owner need not wait). The epoch
 * stays; the next owner's takeover raises it.
 */
export const RELEASE_OTHERS = `
  WITH target AS (
    SELECT shard FROM ctxd_shard_leases
    WHERE owner = $1 AND shard <> ALL ($2::integer[])
    ORDER BY shard FOR UPDATE
  )
  UPDATE ctxd_shard_leases l SET owner = NULL, expires_at = now()
  FROM target WHERE l.shard = target.shard
  RETURNING l.shard`

/**
 * $1 owner, $2 TTL ms, $3 shards (integer[], ascending), $4 the epoch held
 * for each (bigint[], -1 when not held). Takes every listed shard that is
 * free, expired or already `$1`'s, and returns the shards taken with their
 * epochs. A renewal (same owner, the held epoch, not expired) keeps the
 * epoch; anything else is a takeover and raises it, including `$1`
 * re-taking a shard it had stopped serving, so writes fenced with the old
 * epoch stay rejected.
 */
export const CLAIM = `
  WITH target AS (
    SELECT l.shard, w.held
    FROM ctxd_shard_leases l
    JOIN unnest($3::integer[], $4::bigint[]) AS w (shard, held) ON w.shard = l.shard
    WHERE l.owner IS NULL OR l.owner = $1 OR l.expires_at <= now()
    ORDER BY l.shard FOR UPDATE OF l
  )
  UPDATE ctxd_shard_leases l SET
    owner = $1,
    epoch = CASE WHEN l.owner = $1 AND l.epoch = target.held AND l.expires_at > now() THEN l.epoch ELSE l.epoch + 1 END,
    expires_at = now() + $2::integer * interval '1 millisecond'
  FROM target WHERE l.shard = target.shard
  RETURNING l.shard, l.epoch`

/** $1 owner: graceful shutdown, every lease of `$1` released at once. */
export const RELEASE_ALL = `
  UPDATE ctxd_shard_leases SET owner = NULL, expires_at = now()
  WHERE owner = $1
    AND shard IN (SELECT shard FROM ctxd_shard_leases WHERE owner = $1 ORDER BY shard FOR UPDATE)`

/** The held leases, with whether each is still within its TTL. */
export const HOLDERS = `
  SELECT shard, owner, epoch, expires_at > now() AS live
  FROM ctxd_shard_leases WHERE owner IS NOT NULL`

/**
 * $1 worker id, $2 ms: the worker was reported unreachable (no responders on
 * its NATS subject); if its heartbeat is also older than $2 it is declared
 * dead: its membership row is deleted and its leases expire now, so the
 * others need not wait for the TTL. Returns whether it was declared dead by
 * this statement, and whether it was listed at all (before it).
 */
export const DECLARE_DEAD = `
  WITH dead AS (
    DELETE FROM ctxd_workers
    WHERE id = $1 AND heartbeat_at < now() - $2::integer * interval '1 millisecond'
    RETURNING id
  ), target AS (
    SELECT shard FROM ctxd_shard_leases
    WHERE owner = $1 AND EXISTS (SELECT 1 FROM dead)
    ORDER BY shard FOR UPDATE
  ), freed AS (
    UPDATE ctxd_shard_leases l SET owner = NULL, expires_at = now()
    FROM target WHERE l.shard = target.shard AND l.owner = $1
    RETURNING l.shard
  )
  SELECT EXISTS (SELECT 1 FROM dead) AS dead,
         (SELECT count(*) FROM freed)::integer AS freed,
         EXISTS (SELECT 1 FROM ctxd_workers WHERE id = $1) AS listed`
