import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as ReplyCodec from "../src/internal/replyCodec.ts"

describe("ReplyCodec", () => {
  const roundTrip = (json: string | Uint8Array) => ReplyCodec.decode(ReplyCodec.encode(json))

  it("reads back a reply of any size, whether it fits zlib's output buffer or not", () => {
    const reply = { ok: true, turnId: "t1", request: { messages: Array.from({ length: 200 }, (_, i) => ({ role: "user", content: `message ${i} ` + "é✓".repeat(i % 7) })) } }
    const json = JSON.stringify(reply)
    expect(roundTrip(json)).toEqual(reply)
    expect(roundTrip(new TextEncoder().encode(json))).toEqual(reply)
    expect(roundTrip("{}")).toEqual({})
    // a reply that does not compress (random text) takes several output buffers of chunkFor(length)
    const noise = JSON.stringify({ ok: true, noise: randomBytes(40_000).toString("base64") })
    expect(ReplyCodec.encode(noise).length - 1).toBeGreaterThan(ReplyCodec.chunkFor(noise.length))
    expect(roundTrip(noise)).toEqual(JSON.parse(noise))
  })

  it("sizes zlib's output buffer by the input, never below 1 KB", () => {
    expect(ReplyCodec.chunkFor(0)).toBe(1024)
    expect(ReplyCodec.chunkFor(17_794)).toBe(8897)
  })
})
