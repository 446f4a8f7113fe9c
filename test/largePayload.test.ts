// Replies and requests larger than the NATS max_payload (the server's default,
// 1 MiB) travel through the JetStream object store: a session whose prompt
// grows to 5 MB gets every reply (and a retry of its last turn gets it too),
// a 2 MB tool result is accepted, and a client that is not ContextClient reads
// a large reply with plain NATS requests, following docs/wire-contract.md.
import { ContextClient } from "@ctxd/client"
import { connect } from "@nats-io/transport-node"
import { createHash, randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let client: Awaited<ReturnType<typeof ContextClient.connect>>
const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
beforeAll(async () => {
  h = await Harness.start()
  client = await ContextClient.connect({ servers, root: h.root, timeoutMs: 30_000, retryForMs: 30_000 })
})
afterAll(async () => {
  await client?.close()
  await h?.close()
})

const model = { provider: "openai" as const, name: "gpt-4.1", contextWindow: 10_000_000, maxOutputTokens: 1_000 }
const options = { windowMessages: 1_000, freshTailMessages: 1_000, tokenBackend: "heuristic" as const }
const text = (bytes: number) => randomBytes(bytes / 2).toString("hex")
const size = (value: unknown) => Buffer.byteLength(JSON.stringify(value))

describe("bodies above the NATS max_payload", () => {
  it("a session growing to 5 MB of prompt gets every reply, and a retry of its last turn gets it too", async () => {
    expect(h.nc.info?.max_payload).toBe(1024 * 1024)
    let last: { turnId: string; messages: Array<{ role: "user" | "assistant"; content: string }>; reply: unknown } | undefined
    for (let i = 0; i < 9; i++) {
      const messages = [
        ...(i === 0 ? [] : [{ role: "assistant" as const, content: `noted ${i}` }]),
        { role: "user" as const, content: text(600_000) },
      ]
      const turnId = `grow-${i}`
      const reply = await client.turn("acme", "grow", { turnId, format: "openai", model, options, messages })
      expect(reply.ok).toBe(true)
      expect(reply.turnId).toBe(turnId)
      const sent = (reply.request as { messages: unknown[] }).messages
      expect(sent.filter((m) => (m as { role: string }).role === "user")).toHaveLength(i + 1)
      expect(size(reply.request)).toBeGreaterThan((i + 1) * 600_000)
      last = { turnId, messages, reply }
    }
    expect(size(last!.reply)).toBeGreaterThan(5_000_000)
    // the caller lost the reply and retries: same turnId, same content → the same (5 MB) stored reply
    const again = await client.turn("acme", "grow", { turnId: last!.turnId, format: "openai", model, options, messages: last!.messages })
    expect(again).toEqual(last!.reply)
    const stored = await h.sql<{ n: string }>("select count(*) as n from ctxd_turns")
    expect(Number(stored[0]!.n)).toBe(9)
    expect(h.worker.output()).not.toMatch(/lost|max_payload size exceeded/)
  }, 180_000)

  it("a retry of the same turn (same turnId, same content) gets the large stored reply", async () => {
    const messages = [{ role: "user" as const, content: text(1_500_000) }]
    const first = await client.turn("acme", "retry", { turnId: "r-1", format: "openai", model, options, messages })
    const retry = await client.turn("acme", "retry", { turnId: "r-1", format: "openai", model, options, messages })
    expect(size(first)).toBeGreaterThan(1_500_000)
    expect(retry).toEqual(first)
  }, 60_000)

  it("a 2 MB request (one huge tool result) is accepted through ContextClient", async () => {
    const result = text(2_000_000)
    const reply = await client.turn("acme", "tool", {
      format: "openai",
      model,
      options,
      tools: [{ type: "function", function: { name: "dump", description: "Dump", parameters: { type: "object", properties: {} } } }],
      messages: [
        { role: "user", content: "dump everything" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "dump", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "call_1", content: result },
      ],
    })
    expect(reply.ok).toBe(true)
    const tool = (reply.request as { messages: Array<{ role: string; content: unknown }> }).messages.find((m) => m.role === "tool")
    expect(tool?.content).toBe(result)
    const rows = await h.sql<{ n: string }>(
      "select count(*) as n from ctxd_messages m join ctxd_sessions s on s.id = m.session_id where s.session = 'tool'",
    )
    expect(Number(rows[0]!.n)).toBe(3)
  }, 60_000)

  it("a client in any language reads a large reply with plain JetStream requests (docs/wire-contract.md steps)", async () => {
    const nc = await connect({ servers })
    try {
      // two turns of 700 KB each: every request fits the max_payload, the second reply does not
      const turn = (turnId: string, messages: unknown[]) => JSON.stringify({ turnId, format: "openai", model, options, messages })
      const first = await nc.request(h.turnSubject("acme", "raw"), turn("raw-0", [{ role: "user", content: text(700_000) }]), {
        timeout: 30_000,
      })
      expect(first.headers?.get("ctxd-payload") ?? "").toBe("")
      expect(first.json<{ ok: boolean }>().ok).toBe(true)
      const messages = [
        { role: "assistant", content: "noted" },
        { role: "user", content: text(700_000) },
      ]
      const msg = await nc.request(h.turnSubject("acme", "raw"), turn("raw-1", messages), { timeout: 30_000 })
      // 1. the header and the small JSON say where the body is
      expect(msg.headers?.get("ctxd-payload")).toBe("objectstore")
      const small = msg.json<{
        ok: boolean
        turnId: string
        payload: { objectStore: { bucket: string; name: string; size: number; sha256: string } }
      }>()
      expect(small.ok).toBe(true)
      expect(small.turnId).toBe("raw-1")
      const { bucket, name, size: bytes, sha256 } = small.payload.objectStore
      expect(bucket).toBe(`ctxd-payloads-${h.root}`)
      // 2. the object's metadata: the last message on $O.<bucket>.M.<name in base64url, with = padding>
      const api = `$JS.API.DIRECT.GET.OBJ_${bucket}`
      const encoded = Buffer.from(name).toString("base64").replaceAll("+", "-").replaceAll("/", "_")
      const metaSubject = `$O.${bucket}.M.${encoded}`
      const meta = (await nc.request(api, JSON.stringify({ last_by_subj: metaSubject }))).json<{
        nuid: string
        size: number
        chunks: number
      }>()
      expect(meta.size).toBe(bytes)
      // 3. its chunks, in order, on $O.<bucket>.C.<nuid>
      const parts: Uint8Array[] = []
      let seq = 0
      for (let i = 0; i < meta.chunks; i++) {
        const chunk = await nc.request(api, JSON.stringify({ seq: seq + 1, next_by_subj: `$O.${bucket}.C.${meta.nuid}` }))
        seq = Number(chunk.headers?.get("Nats-Sequence"))
        parts.push(chunk.data)
      }
      const body = Buffer.concat(parts)
      // 4. check size and sha256, then parse: the usual turn reply
      expect(body.length).toBe(bytes)
      expect(createHash("sha256").update(body).digest("hex")).toBe(sha256)
      const reply = JSON.parse(body.toString("utf8")) as { ok: boolean; turnId: string; request: { messages: unknown[] } }
      expect(reply).toMatchObject({ ok: true, turnId: "raw-1" })
      expect(reply.request.messages).toHaveLength(3)
    } finally {
      await nc.close()
    }
  }, 60_000)
})
