/**
 * A least-recently-used map from string keys (content hashes) to values,
 * with hit/miss counters: the token-count caches (local and exact). A `Map` iterates in insertion order, so re-inserting a key on every hit
 * keeps the oldest entry first and eviction is O(1).
 */

/** A bounded map with hit/miss counters. */
export interface Lru<V> {
  /** The value under `key` (now the most recently used), or `undefined`. Counts a hit or a miss. */
  readonly get: (key: string) => V | undefined
  /** Stores `value`, evicting the least recently used entry when full. */
  readonly set: (key: string, value: V) => void
  readonly size: () => number
  readonly capacity: number
  /** Lookups answered from the map since creation. */
  readonly hits: () => number
  /** Lookups that found nothing since creation. */
  readonly misses: () => number
}

/** An LRU holding at most `capacity` entries (at least 1; default 1,024). */
export const make = <V>(capacity: number = 1_024): Lru<V> => {
  const max = Math.max(1, Math.floor(capacity))
  const entries = new Map<string, V>()
  let hits = 0
  let misses = 0
  return {
    capacity: max,
    get: (key) => {
      if (!entries.has(key)) {
        misses++
        return undefined
      }
      const value = entries.get(key) as V
      entries.delete(key)
      entries.set(key, value)
      hits++
      return value
    },
    set: (key, value) => {
      entries.delete(key)
      entries.set(key, value)
      if (entries.size > max) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
    },
    size: () => entries.size,
    hits: () => hits,
    misses: () => misses,
  }
}
