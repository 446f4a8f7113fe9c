/**
 * A least-recently-used map from string keys to numbers. A `Map` iterates in
 * insertion order, so re-inserting a key on every hit keeps the oldest entry
 * first and eviction is O(1).
 */
export interface Lru {
  readonly get: (key: string) => number | undefined
  readonly set: (key: string, value: number) => void
  readonly size: () => number
}

/** An LRU holding at most `capacity` entries (at least 1). */
export const make = (capacity: number): Lru => {
  const max = Math.max(1, Math.floor(capacity))
  const entries = new Map<string, number>()
  return {
    get: (key) => {
      const value = entries.get(key)
      if (value !== undefined) {
        entries.delete(key)
        entries.set(key, value)
      }
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
  }
}
