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
  {
    type: "function",
    function: { name: "get_user", description: "Reads a user.", parameters: { type: "object", properties: { id: { type: "string" } } } },
  },
  {
    type: "function",
    function: { name: "book", description: "Books a flight.", parameters: { type: "object", properties: { flight: { type: "string" } } } },
  },
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
    const text = JSON.stringify(
      request({ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: "DEEP" } } } }] }),
    ).replace('"DEEP"', deep)
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
    prefixes.remember(ids.tenant, ids.session, refs, "openai")
    const byRef = ok(decode(prefixes, request({ system: { ref: refs.system }, tools: { ref: refs.tools } })))
    expect(byRef.request.system).toEqual(system.map((s) => ({ ...s })))
    expect(byRef.parts.tools).toBe(full.parts.tools)
    // the same turn by ref or in full: the same idempotency hash
    expect(byRef.hash.current).toBe(full.hash.current)
    expect(byRef.hash.current.startsWith(Decode.HASH_VERSION)).toBe(true)
    // another session, another tenant: unknown
    for (const who of [
      { ...ids, session: "s2" },
      { ...ids, tenant: "other" },
    ]) {
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
    prefixes.remember(ids.tenant, ids.session, Decode.refs(full)!, "openai")
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
    expect(
      Commit.sameRequest(`${Decode.HASH_VERSION}0`, { current: decoded.hash.current, legacy: () => ((legacyComputed = true), "") }),
    ).toBe(false)
    expect(legacyComputed).toBe(false)
  })

  it("the cache holds at most its bytes (least recently used out first), and the session refs at most their bound", () => {
    const one = Prefixes.entryOf("system", Prefixes.hashOf(system)!, undefined).bytes
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
    for (const session of ["a", "b", "c"]) prefixes.remember("acme", session, { system: first.parts.system!.hash }, "openai")
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
    prefixes.remember(ids.tenant, ids.session, Decode.refs(first)!, "openai")
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

  describe("a part resent as the session sent it last is found in the text, not parsed", () => {
    /** A decode of `text` with the session's last parts remembered, and the same with a cache that knows nothing. */
    const both = (text: string, remembered = request()) => {
      const prefixes = fresh()
      const first = ok(decode(prefixes, remembered))
      prefixes.remember(ids.tenant, ids.session, Decode.refs(first)!, "openai")
      return { first, found: Decode.turn(encoder.encode(text), prefixes, ids), plain: Decode.turn(encoder.encode(text), fresh(), ids) }
    }
    const same = (a: Either.Either<Decode.Decoded, unknown>, b: Either.Either<Decode.Decoded, unknown>) => {
      const [x, y] = [ok(a), ok(b)]
      expect(x.request).toEqual(y.request)
      expect(x.hash.current).toBe(y.hash.current)
      expect(Decode.refs(x)).toEqual(Decode.refs(y))
    }

    it("the same entries as a cache hit, the same request and hash as a fresh decode", () => {
      const text = JSON.stringify(request({ turnId: "t2", messages: [{ role: "user", content: "again" }] }))
      const prefixes = fresh()
      const first = ok(decode(prefixes, request()))
      prefixes.remember(ids.tenant, ids.session, Decode.refs(first)!, "openai")
      // the texts parsed: only the request without its system and tools
      const parsed: Array<number> = []
      const parse = JSON.parse
      JSON.parse = (text: string, reviver?: Parameters<typeof JSON.parse>[1]) => (parsed.push(text.length), parse(text, reviver))
      let found: Either.Either<Decode.Decoded, unknown>
      try {
        found = Decode.turn(encoder.encode(text), prefixes, ids)
      } finally {
        JSON.parse = parse
      }
      const partsLength = JSON.stringify(system).length + JSON.stringify(tools).length
      expect(parsed).toEqual([expect.any(Number)])
      expect(parsed[0]).toBeLessThan(text.length - partsLength + 200)
      const plain = Decode.turn(encoder.encode(text), fresh(), ids)
      expect(ok(found).parts.system).toBe(first.parts.system)
      expect(ok(found).parts.tools).toBe(first.parts.tools)
      same(found, plain)
    })

    it("nested or under a duplicate key, the request is read as JSON.parse reads it", () => {
      const other = [tools[1]]
      // an unknown field holding the same tools before the real (other) ones
      const nested = both(
        JSON.stringify({
          turnId: "t2",
          format: "openai",
          model: request().model,
          x: tools,
          tools: other,
          system,
          messages: request().messages,
        }),
      )
      same(nested.found, nested.plain)
      expect(ok(nested.found).request.tools).toEqual(other)
      // "tools" twice: the last one counts, as for JSON.parse
      const text = JSON.stringify(request({ turnId: "t2" })).replace('"messages":', `"tools":${JSON.stringify(other)},"messages":`)
      const twice = both(text)
      same(twice.found, twice.plain)
      expect(ok(twice.found).request.tools).toEqual(other)
      const first = JSON.stringify(request({ turnId: "t2", tools: other })).replace(
        '"messages":',
        `"tools":${JSON.stringify(tools)},"messages":`,
      )
      const last = both(first)
      same(last.found, last.plain)
      expect(ok(last.found).request.tools).toEqual(tools)
    })

    it("a request of another format with the same text is decoded in its own format", () => {
      const text = "You are a careful airline agent. ".repeat(40)
      const anthropic = {
        turnId: "t2",
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-sonnet-4-5" },
        system: text,
        messages: [{ role: "user", content: "hi" }],
      }
      const { found, plain } = both(JSON.stringify(anthropic), request({ system: text }))
      same(found, plain)
      expect(ok(found).request.format).toBe("anthropic")
    })

    it("found by its UTF-8 bytes: non-ASCII text in and around the parts reads as a fresh decode does", () => {
      const unicode = [{ id: "rules", text: `日本語の規則 é 😀 ${"ü".repeat(200)}`, cache: "1h" as const }]
      const body = request({ turnId: "t2", system: unicode, messages: [{ role: "user", content: "ça va? 😀 日本" }] })
      const { found, plain } = both(JSON.stringify(body), request({ system: unicode, messages: [{ role: "user", content: "✓" }] }))
      same(found, plain)
      expect((ok(found).request as { messages?: unknown }).messages).toEqual(body.messages)
    })

    it("bad UTF-8 or a U+FEFF between tokens around a found part is refused as a fresh decode refuses it; a leading BOM is read alike", () => {
      const text = JSON.stringify(request({ turnId: "t2" }))
      const bytes = encoder.encode(text)
      const refusedAlike = (data: Uint8Array) => {
        const prefixes = fresh()
        prefixes.remember(ids.tenant, ids.session, Decode.refs(ok(decode(prefixes, request())))!, "openai")
        const found = Decode.turn(data, prefixes, ids)
        const plain = Decode.turn(data, fresh(), ids)
        expect(Either.isLeft(found) && Either.isLeft(plain)).toBe(true)
        expect(Either.isLeft(found) ? found.left.message : "").toBe(Either.isLeft(plain) ? plain.left.message : "")
      }
      // a lone continuation byte in the last message, after both parts
      const at = text.indexOf("hello")
      refusedAlike(Uint8Array.from([...bytes.subarray(0, at), 0x80, ...bytes.subarray(at)]))
      // U+FEFF right after the tools (the start of a stretch between cuts): not whitespace to JSON
      const after = text.indexOf(JSON.stringify(tools)) + JSON.stringify(tools).length
      refusedAlike(Uint8Array.from([...bytes.subarray(0, after), 0xef, 0xbb, 0xbf, ...bytes.subarray(after)]))
      // a BOM at the very start is dropped by both
      const bom = both("\ufeff" + text)
      same(bom.found, bom.plain)
      expect(ok(bom.found).parts.tools).toBe(bom.first.parts.tools)
    })

    it("the part's text inside a string of an earlier message (after an escaped quote) is left alone", () => {
      const text = "k".repeat(300)
      // "content":"x\"kkk…" holds the part's text "kkk…" (opening quote escaped) before the real system
      const body = {
        turnId: "t2",
        format: "openai",
        model: request().model,
        messages: [{ role: "user", content: `x"${text}` }],
        system: text,
      }
      const { found, plain } = both(JSON.stringify(body), request({ system: text }))
      same(found, plain)
      expect((ok(found).request as { messages?: unknown }).messages).toEqual(body.messages)
    })
  })
})
