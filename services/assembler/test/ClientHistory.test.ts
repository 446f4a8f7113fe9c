import type { Conversation } from "@ctxd/contracts"
import { ShardId } from "@ctxd/sharding"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Branches from "../src/Branches.ts"
import { equal, match } from "../src/ClientHistory.ts"

/** A value's JSON text with object keys sorted and `undefined` members left out (as JSON leaves them out). */
const canonical = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonical(v))).join(",")}]`
  const record = value as Record<string, unknown>
  const keys = Object.keys(record)
    .filter((k) => record[k] !== undefined)
    .sort()
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(record[k])}`).join(",")}}`
}

const text = (role: Conversation.Role, t: string): Conversation.Message => ({ role, parts: [{ type: "text", text: t }] })
const arbMessage: fc.Arbitrary<Conversation.Message> = fc
  .tuple(fc.constantFrom<Conversation.Role>("user", "assistant"), fc.string({ maxLength: 6 }))
  .map(([role, t]) => text(role, t))
const arbHistory = fc.array(arbMessage, { maxLength: 8 })

/** A copy with every object's keys in reverse order (as `jsonb` may give them back). */
const reordered = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(reordered)
    : typeof value === "object" && value !== null
      ? Object.fromEntries(
          Object.entries(value)
            .reverse()
            .map(([k, v]) => [k, reordered(v)]),
        )
      : value

describe("ClientHistory.equal", () => {
  it("is equality of the JSON texts with keys sorted", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (x, y) => equal(x, y) === (canonical(x) === canonical(y)) && equal(x, reordered(x))),
    )
    expect(equal({ a: 1, b: undefined }, { a: 1 })).toBe(true)
    expect(equal({ a: 1 }, { a: 1, b: 2 })).toBe(false)
    expect(equal([1, 2], [2, 1])).toBe(false)
    expect(equal([], {})).toBe(false)
  })
})

describe("ClientHistory.match", () => {
  it("finds every stored history extended by the client's, and matches all of it", () => {
    fc.assert(
      fc.property(arbHistory, arbHistory, (stored, more) => {
        const result = match(stored.map(reordered) as Array<Conversation.Message>, [...stored, ...more])
        return result._tag === "Extends" && result.matched === stored.length
      }),
    )
  })

  it("reports where a client's history leaves the stored one, and never calls it an extension", () => {
    fc.assert(
      fc.property(arbHistory, arbHistory, (stored, client) => {
        const result = match(stored, client)
        const isPrefix = stored.length <= client.length && stored.every((m, i) => canonical(m) === canonical(client[i]))
        if (isPrefix) return result._tag === "Extends"
        if (result._tag !== "Forked") return false
        // every message before `at` is the same, and `at` is where they part
        const same = stored.slice(0, result.at).every((m, i) => canonical(m) === canonical(client[i]))
        return (
          same &&
          (result.reason === "shorter" ? result.at === client.length : canonical(stored[result.at]) !== canonical(client[result.at]))
        )
      }),
    )
  })

  it("compares content, not count", () => {
    const stored = [text("user", "a"), text("assistant", "b")]
    expect(match(stored, [text("user", "a"), text("assistant", "B"), text("user", "c")])).toEqual({
      _tag: "Forked",
      at: 1,
      reason: "diverged",
    })
  })

  it("skips the mid-conversation notes ctxd stored itself", () => {
    const note: Conversation.Message = { role: "system", parts: [{ type: "text", text: "Memory: x" }], midConversation: true }
    const stored = [text("user", "a"), note, text("assistant", "b")]
    expect(match(stored, [text("user", "a"), text("assistant", "b"), text("user", "c")])).toEqual({ _tag: "Extends", matched: 2 })
  })

  it("matches a client's own mid-conversation system message where it stands", () => {
    const mid: Conversation.Message = { role: "system", parts: [{ type: "text", text: "date: today" }], midConversation: true }
    const stored = [text("user", "a"), mid, text("assistant", "b")]
    expect(match(stored, [text("user", "a"), mid, text("assistant", "b")])).toEqual({ _tag: "Extends", matched: 3 })
  })

  it("leaves undefined members out as the store does", () => {
    const sent = { role: "user", parts: [{ type: "text", text: "a", signature: undefined }], name: undefined } as Conversation.Message
    expect(match([text("user", "a")], [sent])).toEqual({ _tag: "Extends", matched: 1 })
  })
})

describe("Branches", () => {
  it("names branches on the session's shard, apart from each other and from other sessions", () => {
    const shardOf = (tenant: string, session: string) => ShardId.of(tenant, session, 256)
    const seen = new Set<string>()
    for (const session of ["s", "x".repeat(128), "s-b1"]) {
      for (let k = 1; k <= 5; k++) {
        const id = Branches.branchId("acme", session, k, shardOf)
        expect(id).toMatch(/^[A-Za-z0-9_-]{1,128}$/)
        expect(shardOf("acme", id)).toBe(shardOf("acme", session))
        expect(seen.has(id)).toBe(false)
        seen.add(id)
      }
    }
    expect(Branches.branchId("acme", "s", 0, shardOf)).toBe("s")
    // another tenant's branch of the same session is another id
    expect(Branches.branchId("other", "s", 1, shardOf)).not.toBe(Branches.branchId("acme", "s", 1, shardOf))
  })

  it("tries the cached branch, the newest ones, then the session itself", () => {
    expect(Branches.candidates(0, undefined)).toEqual([0])
    expect(Branches.candidates(2, 1)).toEqual([1, 2, 0])
    expect(Branches.candidates(20, 3)).toEqual([3, 20, 19, 18, 17, 16, 15, 14, 0])
  })
})
