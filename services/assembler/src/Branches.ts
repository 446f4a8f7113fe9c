/**
 * The branches of a session. When a client's whole history no longer
 * extends the stored one, its history starts a new branch: a session of its
 * own, `<session>-b<k>-<10 hex>`, beside the session (branch 0) and its
 * earlier branches, so neither history is ever mixed into the other or
 * lost, and a worker of an earlier release reads each as a session.
 *
 * A branch lives on its session's shard: the hex part is the first hash of
 * `<tenant>/<session>#<k>#<j>` (j = 0, 1, ...) whose id falls on the same
 * shard (`ShardId`: the shard count is fixed for the life of a cluster), so
 * the worker that owns the session writes its branches under the same
 * fence, in the same session actor. The hash of the parent's name in the id
 * keeps a client's own session named like a branch apart from it.
 *
 * A branch exists once a turn was committed to it; the newest is found by
 * asking for branch k + 1 until there is none.
 */
import { createHash } from "node:crypto"

/** The session ids longer than this are shortened (with a hash) before the branch suffix: 100. */
const MAX_PREFIX = 100

/** The most salts tried for one branch id: far beyond what any shard count needs (2^22). */
const MAX_SALTS = 1 << 22

const hex = (text: string, chars: number): string => createHash("sha256").update(text, "utf8").digest("hex").slice(0, chars)

// branch ids computed lately (each costs about as many hashes as there are shards); cleared when full
const computed = new Map<string, string>()
const COMPUTED = 16_384

/**
 * The id of branch `k` (≥ 1) of `tenant`/`session`, on the session's shard
 * as `shardOf` computes it; branch 0 is the session itself.
 */
export const branchId = (tenant: string, session: string, k: number, shardOf: (tenant: string, session: string) => number): string => {
  if (k === 0) return session
  const cacheKey = `${tenant}\u0000${session}\u0000${k}`
  const hit = computed.get(cacheKey)
  if (hit !== undefined) return hit
  const shard = shardOf(tenant, session)
  const prefix = session.length <= MAX_PREFIX ? session : `${session.slice(0, 80)}-${hex(session, 16)}`
  for (let j = 0; j < MAX_SALTS; j++) {
    const id = `${prefix}-b${k}-${hex(`${tenant}/${session}#${k}#${j}`, 10)}`
    if (shardOf(tenant, id) === shard) {
      if (computed.size >= COMPUTED) computed.clear()
      computed.set(cacheKey, id)
      return id
    }
  }
  throw new Error(`no branch id on the shard of the session after ${MAX_SALTS} tries`)
}

/** Branches tried for a client's history besides the cached one and the session itself: the newest 7. */
export const MAX_TRIED = 7

/**
 * The branches a client's history is matched against, in order: the one
 * the session's cached state holds (if any), then the newest `MAX_TRIED`
 * down from `newest`, then the session itself (its main line is never
 * out of reach, however many side branches its sub-agents opened).
 */
export const candidates = (newest: number, cached: number | undefined): ReadonlyArray<number> => {
  const out: Array<number> = cached === undefined ? [] : [cached]
  for (let k = newest; k >= Math.max(0, newest - MAX_TRIED + 1); k--) if (!out.includes(k)) out.push(k)
  if (!out.includes(0)) out.push(0)
  return out
}
