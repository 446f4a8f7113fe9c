import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as ReplyCodec from "../src/internal/replyCodec.ts"

describe("ReplyCodec", () => {
  const roundTrip = (json: string | Uint8Array) => ReplyCodec.decode(ReplyCodec.encode(json))

  it("reads back a reply of any size, whether it fits zlib's output buffer or not", () => {
    const reply = {
      ok: true,
      turnId: "t1",
      request: { messages: Array.from({ length: 200 }, (_, i) => ({ role: "user", content: `message ${i} ` + "é✓".repeat(i % 7) })) },
    }
    const json = JSON.stringify(reply)
    expect(roundTrip(json)).toEqual(reply)
    expect(roundTrip(new TextEncoder().encode(json))).toEqual(reply)
    expect(roundTrip("{}")).toEqual({})
    // a reply that does not compress (random text) takes several output buffers of chunkFor(length)
    const noise = JSON.stringify({ ok: true, noise: randomBytes(40_000).toString("base64") })
    expect(ReplyCodec.encode(noise).length - 1).toBeGreaterThan(ReplyCodec.chunkFor(noise.length))
    expect(roundTrip(noise)).toEqual(JSON.parse(noise))
  })

  it("reads the raw codec (0: the UTF-8 JSON as it is), and refuses unknown codecs", () => {
    const reply = { ok: true, turnId: "t1", body: { messages: [{ role: "user", content: "héllo ✓" }] } }
    const utf8 = new TextEncoder().encode(JSON.stringify(reply))
    const raw = new Uint8Array(utf8.length + 1)
    raw.set(utf8, 1)
    expect(ReplyCodec.decode(raw)).toEqual(reply)
    // a view into a larger buffer (as pg hands out column values) reads only its own bytes
    const backing = new Uint8Array(raw.length + 10).fill(0x7b)
    backing.set(raw, 5)
    expect(ReplyCodec.decode(backing.subarray(5, 5 + raw.length))).toEqual(reply)
    // brotli (codec 1) is still what is written
    expect(ReplyCodec.encode(JSON.stringify(reply))[0]).toBe(1)
    const unknown = Uint8Array.from(raw)
    unknown[0] = 2
    expect(() => ReplyCodec.decode(unknown)).toThrow("unknown reply codec 2")
  })

  it("sizes zlib's output buffer by the input, never below 1 KB", () => {
    expect(ReplyCodec.chunkFor(0)).toBe(1024)
    expect(ReplyCodec.chunkFor(17_794)).toBe(8897)
  })
})
