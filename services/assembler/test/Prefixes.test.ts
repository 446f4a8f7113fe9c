// System and tools handled once per content (issue 18): the same objects
// across turns, refs per session, bounded caches, and the idempotency hash
// (v2, and the legacy one of workers before it).
import { Turn } from "@ctxd/contracts"
import { Either, Schema } from "effect"
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import * as Commit from "../src/Commit.ts"
import * as Decode from "../src/Decode.ts"
import * as Prefixes from "../src/Prefixes.ts"

const encoder = new TextEncoder()
const ids = { tenant: "acme", session: "s1" }

const system = [
  { id: "rules", text: "You are a careful airline agent. ".repeat(40), cache: "1h" as const },
  { id: "policy", text: "Refunds need a reason." },
]
const tools = [
  { type: "function", function: { name: "get_user", description: "Reads a user.", parameters: { type: "object", properties: { id: { type: "string" } } } } },
  { type: "function", function: { name: "book", description: "Books a flight.", parameters: { type: "object", properties: { flight: { type: "string" } } } } },
]
const request = (fields: Record<string, unknown> = {}) => ({
  turnId: "t1",
  format: "openai",
  model: { provider: "openai", name: "gpt-4o-mini" },
  system,
  tools,
  messages: [{ role: "user", content: "hello" }],
  ...fields,
})

const decode = (prefixes: Prefixes.Prefixes, body: unknown, who = ids) => Decode.turn(encoder.encode(JSON.stringify(body)), prefixes, who)
const ok = (result: Either.Either<Decode.Decoded, unknown>): Decode.Decoded => {
  if (Either.isLeft(result)) throw new Error(`expected a decoded request: ${JSON.stringify(result.left)}`)
  return result.right
}
const fresh = () => Prefixes.make({ bytes: Prefixes.defaults.bytes, sessionRefs: 100 })

/** What workers before issue 18 stored: the SHA-256 of the whole decoded request's JSON. */
const oldHash = (body: unknown) =>
  createHash("sha256")
    .update(JSON.stringify(Schema.decodeUnknownSync(Turn.TurnRequest, { onExcessProperty: "ignore" })(body)))
    .digest("hex")

describe("Prefixes", () => {
  it("a second turn with the same system and tools gets the same decoded and normalized objects", () => {
    const prefixes = fresh()
    const first = ok(decode(prefixes, request()))
    const second = ok(decode(prefixes, request({ turnId: "t2", messages: [{ role: "user", content: "again" }] })))
    expect(second.parts.system).toBe(first.parts.system)
    expect(second.parts.tools).toBe(first.parts.tools)
    expect(second.request.system).toBe(first.request.system)
    const a = Decode.normalized(first, () => [], undefined)
    const b = Decode.normalized(second, () => [], undefined)
    expect(b.tools).toBe(a.tools)
    expect(b.system).toBe(a.system)
    expect(a.system.map((s) => s.id)).toEqual(["rules", "policy"])
    expect(a.tools.map((t) => t.name)).toEqual(["get_user", "book"])
    // the reply's refs are the SHA-256 of the parts' JSON, as a client computes them
    expect(Decode.refs(first)).toEqual({
      system: createHash("sha256").update(JSON.stringify(system)).digest("hex"),
      tools: createHash("sha256").update(JSON.stringify(tools)).digest("hex"),
    })
  })

  it("a changed tool list is a new entry; invalid parts are refused as before and never cached", () => {
    const prefixes = fresh()
    const first = ok(decode(prefixes, request()))
    const changed = ok(decode(prefixes, request({ tools: tools.slice(1) })))
    expect(changed.parts.tools).not.toBe(first.parts.tools)
    expect(changed.parts.tools!.hash).not.toBe(first.parts.tools!.hash)
    const bad = decode(prefixes, request({ tools: [{ type: "function", function: { description: "no name" } }] }))
    expect(Either.isLeft(bad) && bad.left.path?.startsWith("tools[0]")).toBe(true)
    const again = decode(prefixes, request({ tools: [{ type: "function", function: { description: "no name" } }] }))
    expect(Either.isLeft(again)).toBe(true)
    const nul = decode(prefixes, request({ system: "a\u0000b" }))
    expect(Either.isLeft(nul) && nul.left.path).toBe("system")
  })

  it("a tool list nested 10,000 deep is refused by the input checks, twice (never cached)", () => {
    const prefixes = fresh()
    const deep = "[".repeat(10_000) + "]".repeat(10_000)
    const text = JSON.stringify(request({ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: "DEEP" } } } }] })).replace('"DEEP"', deep)
    for (let i = 0; i < 2; i++) {
      const result = Decode.turn(encoder.encode(text), prefixes, ids)
      expect(Either.isLeft(result) && result.left.message).toContain("deeper than 128")
    }
    expect(prefixes.size()).toBe(0)
  })

  it("{ref} resolves only for the session that sent the part; an unknown ref is a BadRequest naming system.ref / tools.ref", () => {
    const prefixes = fresh()
    const full = ok(decode(prefixes, request()))
    const refs = Decode.refs(full)!
    // not remembered yet (the turn did not succeed): unknown
    const early = decode(prefixes, request({ system: { ref: refs.system } }))
    expect(Either.isLeft(early) && early.left).toMatchObject({ _tag: "BadRequest", path: "system.ref" })
    prefixes.remember(ids.tenant, ids.session, refs)
    const byRef = ok(decode(prefixes, request({ system: { ref: refs.system }, tools: { ref: refs.tools } })))
    expect(byRef.request.system).toEqual(system.map((s) => ({ ...s })))
    expect(byRef.parts.tools).toBe(full.parts.tools)
    // the same turn by ref or in full: the same idempotency hash
    expect(byRef.hash.current).toBe(full.hash.current)
    expect(byRef.hash.current.startsWith(Decode.HASH_VERSION)).toBe(true)
    // another session, another tenant: unknown
    for (const who of [{ ...ids, session: "s2" }, { ...ids, tenant: "other" }]) {
      const other = decode(prefixes, request({ tools: { ref: refs.tools } }), who)
      expect(Either.isLeft(other) && other.left).toMatchObject({ _tag: "BadRequest", path: "tools.ref" })
      expect(Either.isLeft(other) && other.left.hint).toMatch(/resend/)
    }
    const malformed = decode(prefixes, request({ system: { ref: 42 } }))
    expect(Either.isLeft(malformed) && malformed.left.path).toBe("system.ref")
  })

  it("the turn hash differs with the content, and the legacy hash is the one workers before it stored", () => {
    const prefixes = fresh()
    const body = request()
    const full = ok(decode(prefixes, body))
    expect(full.hash.legacy()).toBe(oldHash(body))
    const other = ok(decode(prefixes, request({ messages: [{ role: "user", content: "hello!" }] })))
    expect(other.hash.current).not.toBe(full.hash.current)
    const otherTools = ok(decode(prefixes, request({ tools: tools.slice(1) })))
    expect(otherTools.hash.current).not.toBe(full.hash.current)
    // a cached (hit) and a ref request rebuild the legacy hash of the request in full
    const hit = ok(decode(prefixes, body))
    expect(hit.hash.legacy()).toBe(oldHash(body))
    prefixes.remember(ids.tenant, ids.session, Decode.refs(full)!)
    const byRef = ok(decode(prefixes, request({ system: { ref: Decode.refs(full)!.system } })))
    expect(byRef.hash.legacy()).toBe(oldHash(body))
  })

  it("a stored legacy hash answers a retry of the same content, and only that (rolling upgrade)", () => {
    const prefixes = fresh()
    const body = request()
    const decoded = ok(decode(prefixes, body))
    expect(Commit.sameRequest(oldHash(body), decoded.hash)).toBe(true)
    expect(Commit.sameRequest(decoded.hash.current, decoded.hash)).toBe(true)
    expect(Commit.sameRequest(oldHash(request({ messages: [{ role: "user", content: "other" }] })), decoded.hash)).toBe(false)
    // a v2 hash is never compared as a legacy one
    let legacyComputed = false
    expect(Commit.sameRequest(`${Decode.HASH_VERSION}0`, { current: decoded.hash.current, legacy: () => ((legacyComputed = true), "") })).toBe(false)
    expect(legacyComputed).toBe(false)
  })

  it("the cache holds at most its bytes (least recently used out first), and the session refs at most their bound", () => {
    const one = Prefixes.hashOf(system)!.bytes
    const prefixes = Prefixes.make({ bytes: one * 2 + 10, sessionRefs: 2 })
    const systems = [0, 1, 2].map((i) => [{ ...system[0]!, text: `${system[0]!.text}${i}` }, system[1]!])
    const first = ok(decode(prefixes, request({ system: systems[0], tools: undefined })))
    ok(decode(prefixes, request({ system: systems[1], tools: undefined })))
    expect(prefixes.size()).toBe(2)
    ok(decode(prefixes, request({ system: systems[2], tools: undefined })))
    expect(prefixes.size()).toBe(2)
    expect(prefixes.bytes()).toBeLessThanOrEqual(one * 2 + 10)
    // the first was evicted: decoded again, a new entry
    expect(ok(decode(prefixes, request({ system: systems[0], tools: undefined }))).parts.system).not.toBe(first.parts.system)
    for (const session of ["a", "b", "c"]) prefixes.remember("acme", session, { system: first.parts.system!.hash })
    expect(prefixes.refs()).toBe(2)
    expect(prefixes.known("acme", "a", "system", first.parts.system!.hash)).toBe(false)
    expect(prefixes.known("acme", "c", "system", first.parts.system!.hash)).toBe(true)
  })

  it("prefixCacheBytes 0 caches nothing and knows no ref", () => {
    const prefixes = Prefixes.make({ bytes: 0, sessionRefs: 10 })
    const first = ok(decode(prefixes, request()))
    const second = ok(decode(prefixes, request()))
    expect(second.parts.tools).not.toBe(first.parts.tools)
    expect(second.hash.current).toBe(first.hash.current)
    prefixes.remember(ids.tenant, ids.session, Decode.refs(first)!)
    expect(prefixes.size()).toBe(0)
    const byRef = decode(prefixes, request({ tools: { ref: Decode.refs(first)!.tools } }))
    expect(Either.isLeft(byRef) && byRef.left.path).toBe("tools.ref")
  })

  it("a workspace reference is not cached and stays in the hashed rest", () => {
    const prefixes = fresh()
    const a = ok(decode(prefixes, request({ system: { workspace: "acme" } })))
    const b = ok(decode(prefixes, request({ system: { workspace: "other" } })))
    expect(a.parts.system).toBeUndefined()
    expect(a.request.system).toEqual({ workspace: "acme" })
    expect(a.hash.current).not.toBe(b.hash.current)
  })
})
