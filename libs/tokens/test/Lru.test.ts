import { describe, expect, it } from "vitest"
import * as Lru from "../src/Lru.ts"

describe("Lru", () => {
  it("evicts the least recently used entry and counts hits and misses", () => {
    const lru = Lru.make<number>(2)
    lru.set("a", 1)
    lru.set("b", 2)
    expect(lru.get("a")).toBe(1) // "b" is now the oldest
    lru.set("c", 3)
    expect(lru.get("b")).toBeUndefined()
    expect(lru.get("a")).toBe(1)
    expect(lru.get("c")).toBe(3)
    expect(lru.size()).toBe(2)
    expect({ hits: lru.hits(), misses: lru.misses() }).toEqual({ hits: 3, misses: 1 })
    expect(Lru.make(0).capacity).toBe(1)
    expect(Lru.make().capacity).toBe(1_024)
  })
})
