// The gateway's NATS port against a real worker: a client's request (as
// its SDK sends it) becomes a turn on <root>.v1.turn.<tenant>.<session>, the
// reply becomes the upstream body, and a billed usage reaches the worker's
// usage store (a shadowed request's usage does not: it was billed for the
// client's body). With no worker, the port is not ready and a prompt fails.
import { NatsPort, Shadow } from "@ctxd/gateway"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let port: Awaited<ReturnType<typeof NatsPort.connect>>
const shadow = Shadow.make()
const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"

beforeAll(async () => {
  h = await Harness.start()
  port = await NatsPort.connect({ servers, root: h.root }, { shadow })
})
afterAll(async () => {
  await port?.close()
  await h?.close()
})

const key = (session: string) => ({ tenant: "gwrun", session, from: "header", side: false }) as const
const body = {
  model: "gpt-5-mini",
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "hello" },
  ],
  temperature: 0,
}

const reports = async (session: string): Promise<number> =>
  Number((await h.sql<{ n: string }>("select count(*) as n from ctxd_usage_reports where session = $1", [session]))[0]!.n)

const eventually = async (check: () => Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error("not in time")
}

describe("NatsPort", () => {
  it("is ready while a worker answers", async () => {
    expect(await port.ready()).toBe(true)
  })

  it("asks the fleet for the turn and reports its usage", async () => {
    const reply = await port.prompt({ api: "openai-chat", body, key: key("gw-nats-1"), model: "gpt-5-mini" }, new AbortController().signal)
    expect(reply.body.messages).toEqual(body.messages)
    expect(reply.body).not.toHaveProperty("model")
    port.usage({
      key: key("gw-nats-1"),
      turnId: reply.turnId,
      api: "openai-chat",
      model: "gpt-5-mini",
      usage: { prompt_tokens: 20, completion_tokens: 2 },
    })
    await eventually(async () => (await reports("gw-nats-1")) === 1)
    // the same body again is the same turn (a client's retry): the stored reply, nothing appended
    const again = await port.prompt({ api: "openai-chat", body, key: key("gw-nats-1"), model: "gpt-5-mini" }, new AbortController().signal)
    expect(again.turnId).toBe(reply.turnId)
  })

  it("records a shadowed request's usage in the shadow record, not the worker's (the report need not say its mode)", async () => {
    const reply = await port.prompt(
      { api: "openai-chat", body, key: key("gw-nats-2"), model: "gpt-5-mini", mode: "shadow" },
      new AbortController().signal,
    )
    port.usage({
      key: key("gw-nats-2"),
      turnId: reply.turnId,
      api: "openai-chat",
      model: "gpt-5-mini",
      usage: { prompt_tokens: 20 },
      mode: "shadow",
    })
    expect(shadow.session("gwrun", "gw-nats-2")).toMatchObject({ requests: 1, billed: { prompt_tokens: 20 } })
    await new Promise((r) => setTimeout(r, 300))
    expect(await reports("gw-nats-2")).toBe(0)
  })

  it("with no worker on the root: not ready, and a prompt fails (the gateway's failure policy applies)", async () => {
    const lonely = await NatsPort.connect({ servers, root: `${h.root}x`, timeoutMs: 300, retryForMs: 300 })
    try {
      expect(await lonely.ready()).toBe(false)
      await expect(
        lonely.prompt({ api: "openai-chat", body, key: key("gw-nats-3"), model: "gpt-5-mini" }, new AbortController().signal),
      ).rejects.toMatchObject({ code: "Unavailable" })
    } finally {
      await lonely.close()
    }
  })
})
