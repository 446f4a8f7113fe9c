// Prefix refs (issue 18) against a real worker: the reply names the hashes
// of system and tools, a turn may send {ref} instead, an unknown ref is a
// BadRequest naming it, ContextClient sends refs by itself and resends in
// full after a worker restart, and a turn stored with a pre-issue-18 hash
// is still answered on retry (rolling upgrade).
import { ContextClient } from "@ctxd/client"
import { Turn } from "@ctxd/contracts"
import { Schema } from "effect"
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
})
afterAll(async () => {
  await h?.close()
})

const system = "You are a support agent for an airline. Be precise. ".repeat(30)
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
const base = { format: "openai" as const, model: { provider: "openai" as const, name: "gpt-4o-mini" } }
const sha = (value: unknown) => createHash("sha256").update(JSON.stringify(value)).digest("hex")

describe("prefix refs", () => {
  it("the reply names the hashes; {ref} gives the same prompt as the full text; an unknown ref is a BadRequest with path and hint", async () => {
    const subject = h.turnSubject("acme", "refs-1")
    const first = await h.request(subject, { ...base, turnId: "t1", system, tools, messages: [{ role: "user", content: "hello" }] })
    expect(first.ok).toBe(true)
    expect(first.refs).toEqual({ system: sha(system), tools: sha(tools) })
    const byRef = await h.request(subject, {
      ...base,
      turnId: "t2",
      system: { ref: first.refs.system },
      tools: { ref: first.refs.tools },
      messages: [
        { role: "assistant", content: "hi" },
        { role: "user", content: "book me" },
      ],
    })
    expect(byRef.ok).toBe(true)
    expect(byRef.refs).toEqual(first.refs)
    expect(byRef.request.messages[0]).toEqual(first.request.messages[0])
    expect(byRef.request.tools).toEqual(first.request.tools)
    // another session never sent them
    const other = await h.request(h.turnSubject("acme", "refs-2"), {
      ...base,
      turnId: "t1",
      tools: { ref: first.refs.tools },
      messages: [{ role: "user", content: "x" }],
    })
    expect(other).toMatchObject({ ok: false, error: { code: "BadRequest", path: "tools.ref" } })
    expect(other.error.hint).toMatch(/resend/)
    const stored = await h.sql<{ n: string }>("select count(*) as n from ctxd_sessions where session = 'refs-2'")
    expect(Number(stored[0]!.n)).toBe(0)
  })

  it("a retry by ref of a turn sent in full is the same turn (same reply), different content under its id a Conflict", async () => {
    const subject = h.turnSubject("acme", "refs-3")
    const body = { ...base, turnId: "t1", system, tools, messages: [{ role: "user", content: "hello" }] }
    const first = await h.request(subject, body)
    const retry = await h.request(subject, { ...body, system: { ref: first.refs.system }, tools: { ref: first.refs.tools } })
    expect(retry).toEqual(first)
    const conflict = await h.request(subject, { ...body, tools: tools.slice(1) })
    expect(conflict).toMatchObject({ ok: false, error: { code: "Conflict" } })
  })

  it("a turn stored with a legacy hash (a worker before refs) is replayed on retry, not refused", async () => {
    const subject = h.turnSubject("acme", "refs-4")
    const body = { ...base, turnId: "t1", system, tools, messages: [{ role: "user", content: "hello" }] }
    const first = await h.request(subject, body)
    // what a worker before issue 18 stored: the SHA-256 of the whole decoded request
    const legacy = createHash("sha256")
      .update(JSON.stringify(Schema.decodeUnknownSync(Turn.TurnRequest, { onExcessProperty: "ignore" })(body)))
      .digest("hex")
    const [row] = await h.sql<{ request_hash: string }>(
      "select t.request_hash from ctxd_turns t join ctxd_sessions s on s.id = t.session_id where s.session = 'refs-4' and t.turn_id = 't1'",
    )
    expect(row!.request_hash.startsWith("v2:")).toBe(true)
    await h.sql(
      "update ctxd_turns t set request_hash = $1 from ctxd_sessions s where s.id = t.session_id and s.session = 'refs-4' and t.turn_id = 't1'",
      [legacy],
    )
    expect(await h.request(subject, body)).toEqual(first)
    expect(await h.request(subject, { ...body, system: { ref: first.refs.system } })).toEqual(first)
    expect(await h.request(subject, { ...body, messages: [{ role: "user", content: "other" }] })).toMatchObject({
      ok: false,
      error: { code: "Conflict" },
    })
  })

  it("ContextClient sends refs once told, and after a worker restart resends in full by itself", async () => {
    const seen: Array<Record<string, unknown>> = []
    // the shared subject only (direct routing off), so this subscription sees every attempt and answers none
    const sub = h.nc.subscribe(h.turnSubject("acme", "refs-5"), { callback: (_err, msg) => void seen.push(msg.json()) })
    const client = await ContextClient.connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", root: h.root, direct: false })
    try {
      const turn = (k: number, messages: ReadonlyArray<unknown>) =>
        client.turn("acme", "refs-5", { ...base, turnId: `t${k}`, system, tools, messages } as never)
      await turn(1, [{ role: "user", content: "hello" }])
      await turn(2, [
        { role: "assistant", content: "hi" },
        { role: "user", content: "again" },
      ])
      await h.nc.flush()
      expect(seen.map((r) => [r["turnId"], typeof r["system"], Array.isArray(r["tools"])])).toEqual([
        ["t1", "string", true],
        ["t2", "object", false],
      ])
      expect(seen[1]!["system"]).toEqual({ ref: sha(system) })
      // the worker restarts: it knows no refs any more
      await h.worker.stop()
      await h.startWorker()
      seen.length = 0
      const reply = await turn(3, [
        { role: "assistant", content: "ok" },
        { role: "user", content: "third" },
      ])
      expect(reply.ok).toBe(true)
      await h.nc.flush()
      const sent = seen.filter((r) => r["turnId"] === "t3")
      // by ref (refused: unknown), then in full once
      expect(sent.at(0)!["tools"]).toEqual({ ref: sha(tools) })
      expect(sent.at(-1)!["system"]).toBe(system)
      expect(sent.filter((r) => typeof r["system"] === "string")).toHaveLength(1)
      // and by ref again from then on
      seen.length = 0
      await turn(4, [
        { role: "assistant", content: "ok" },
        { role: "user", content: "fourth" },
      ])
      await h.nc.flush()
      expect(seen.filter((r) => r["turnId"] === "t4").every((r) => typeof r["system"] === "object")).toBe(true)
    } finally {
      sub.unsubscribe()
      await client.close()
    }
    // a worker restart on a loaded machine, and a client attempt that times out on the stopped worker's subject
  }, 120_000)

  it("ContextClient with refs off always sends the parts in full", async () => {
    const seen: Array<Record<string, unknown>> = []
    const sub = h.nc.subscribe(h.turnSubject("acme", "refs-6"), { callback: (_err, msg) => void seen.push(msg.json()) })
    const client = await ContextClient.connect({
      servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
      root: h.root,
      direct: false,
      refs: false,
    })
    try {
      await client.turn("acme", "refs-6", { ...base, turnId: "t1", system, messages: [{ role: "user", content: "a" }] })
      await client.turn("acme", "refs-6", {
        ...base,
        turnId: "t2",
        system,
        messages: [
          { role: "assistant", content: "b" },
          { role: "user", content: "c" },
        ],
      })
      await h.nc.flush()
      expect(seen.map((r) => typeof r["system"])).toEqual(["string", "string"])
    } finally {
      sub.unsubscribe()
      await client.close()
    }
  })
})
