// Memory in the prompt and learnings through a real worker (real NATS and
// Postgres, a raw nats.js client): memories stored for an agent reach a turn
// of that agent after the last cache breakpoint, within the memory budget,
// and the report names them; a finished session folded by
// ctx.v1.learn.<tenant>.<session> (the summarizer's real SDK against the fake
// provider) gives learnings that the agent's next session carries in a stable
// system section; an agent without memories is not searched.
import { FakeProvider, Workloads } from "@ctxd/testing"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let fake: FakeProvider.FakeProviderServer
beforeAll(async () => {
  fake = await FakeProvider.start()
  h = await Harness.start({ OPENAI_BASE_URL: `${fake.url}/v1`, OPENAI_API_KEY: "test-key" })
})
afterAll(async () => {
  await h?.close()
  await fake?.close()
})

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** Stores memories through ctx.v1.memory.<tenant>, as a runtime would. */
const remember = async (agent: string, docs: ReadonlyArray<{ readonly text: string }>): Promise<Array<{ readonly id: string }>> => {
  const out: Array<{ readonly id: string }> = []
  for (const d of docs) {
    const reply = await h.request(`${h.root}.v1.memory.acme`, { op: "remember", agent, text: d.text })
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
    out.push({ id: reply.id })
  }
  return out
}

const CLAUDE = { provider: "anthropic", name: "claude-sonnet-4-5" }

/** The [message, block] of the last cache_control mark of an Anthropic body's messages. */
const lastMark = (body: Json): [number, number] => {
  const messages = body.messages as Array<{ content: Array<Json> }>
  for (let i = messages.length - 1; i >= 0; i--) {
    const j = messages[i]!.content.findLastIndex((b) => b.cache_control !== undefined)
    if (j !== -1) return [i, j]
  }
  return [-1, -1]
}

const accepted = async (body: Json) => {
  const res = await fetch(`${fake.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": "test", "anthropic-version": "2023-06-01" },
    body: JSON.stringify(body),
  })
  expect(res.status, await res.clone().text()).toBe(200)
}

it("memories reach the agent's turn after the last breakpoint within the budget; learnings from ctx.v1.learn sit in a stable system section", async () => {
  // the agent's memories: two about this user's wishes, and the first requests of 60 real tau-bench sessions as noise
  const noise = Workloads.tauBenchSessions()
    .slice(0, 60)
    .map((s) => ({ text: String((s.turns[0]!.messages[0] as { content: unknown }).content).slice(0, 600) }))
  const [aisle, gold] = await remember("travel", [
    { text: "The user always wants an aisle seat on long flights, never a middle seat." },
    { text: "The user is a gold member: checked baggage is free for them." },
    ...noise,
  ])

  // a finished session of the agent, folded into lessons by the summarizer (the fake provider answers)
  const tau = Workloads.tauBenchSessions()[3]!
  const anthropic = Workloads.toAnthropic(tau)
  for (const [k, turn] of anthropic.turns.slice(0, 3).entries()) {
    const reply = await h.request(h.turnSubject("acme", "done-1"), {
      turnId: `t${k}`,
      format: "anthropic",
      model: CLAUDE,
      system: anthropic.system,
      tools: anthropic.tools,
      messages: turn.messages,
      options: { agent: "travel" },
    })
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
  }
  const lessons = ["Look up the reservation before changing anything.", "Basic economy cannot be modified: offer a cancellation instead."]
  fake.control({ replies: [{ text: lessons.map((l) => `- ${l}`).join("\n") }] })
  const learned = await h.request(
    `${h.root}.v1.learn.acme.done-1`,
    { model: { provider: "openai", name: "gpt-4o" }, agent: "travel" },
    30_000,
  )
  expect(learned.ok, JSON.stringify(learned.error)).toBe(true)
  expect(learned.learnings.map((l: Json) => l.text)).toEqual(lessons)
  expect(learned.messages).toBeGreaterThan(3)
  // the same lessons again are not stored twice
  fake.control({ replies: [{ text: `- ${lessons[0]}` }] })
  const again = await h.request(
    `${h.root}.v1.learn.acme.done-1`,
    { model: { provider: "openai", name: "gpt-4o" }, agent: "travel" },
    30_000,
  )
  expect(again).toMatchObject({ ok: true, learnings: [], duplicates: 1 })
  expect(await h.request(`${h.root}.v1.learn.acme.never-was`, { model: { provider: "openai", name: "gpt-4o" } })).toMatchObject({
    ok: false,
    error: { code: "BadRequest" },
  })

  // a new session of the agent
  const system = [{ id: "policy", text: anthropic.system, cache: "1h" }]
  const first = await h.request(h.turnSubject("acme", "s-new"), {
    turnId: "t0",
    format: "anthropic",
    model: CLAUDE,
    system,
    tools: anthropic.tools,
    options: { agent: "travel" },
    messages: [{ role: "user", content: "Hi, can you move me to an aisle seat on my long flight to Paris?" }],
  })
  expect(first.ok, JSON.stringify(first.error)).toBe(true)
  const memory = first.report.memory
  expect(memory.placement).toBe("tail")
  expect(memory.injected.map((m: Json) => m.id)[0]).toBe(aisle!.id)
  expect(memory.tokens).toBeLessThanOrEqual(memory.budget)
  expect(memory.budget).toBe(2_200)
  expect(first.report.tokens.memory).toBe(memory.tokens)
  // after the last breakpoint, in the latest user turn, as a block of its own
  const body = first.request
  const [mi, bi] = lastMark(body)
  const last = body.messages.at(-1).content as Array<Json>
  expect(mi).toBe(body.messages.length - 1)
  const at = last.findIndex((b) => String(b.text).includes("aisle seat on long flights"))
  expect(at).toBeGreaterThan(bi)
  expect(JSON.stringify(body.system)).not.toContain("aisle seat on long flights")
  // learnings: a system section, reported
  const learnings = (body.system as Array<Json>).find((b) => String(b.text).includes(lessons[0]!))
  expect(learnings).toBeDefined()
  expect(first.report.learnings.injected.map((l: Json) => l.id).sort()).toEqual(learned.learnings.map((l: Json) => l.id).sort())
  expect(first.report.learnings.tokens).toBeLessThanOrEqual(first.report.learnings.budget)
  await accepted(body)

  // the next turn: other memories for another question, the same learnings bytes, the prefix read
  const second = await h.request(h.turnSubject("acme", "s-new"), {
    turnId: "t1",
    format: "anthropic",
    model: CLAUDE,
    system,
    tools: anthropic.tools,
    options: { agent: "travel" },
    messages: [
      { role: "assistant", content: "Sure, which reservation?" },
      { role: "user", content: "Also, do I pay for checked baggage as a gold member?" },
    ],
  })
  expect(second.ok, JSON.stringify(second.error)).toBe(true)
  expect(second.report.memory.injected.map((m: Json) => m.id)).toContain(gold!.id)
  expect((second.request.system as Array<Json>).find((b) => String(b.text).includes(lessons[0]!))).toEqual(learnings)
  expect(second.report.cache.reason).toBe("append")
  await accepted(second.request)

  // an agent without any memory: no retrieval, nothing reported
  const other = await h.request(h.turnSubject("acme", "s-other"), {
    turnId: "t0",
    format: "anthropic",
    model: CLAUDE,
    system,
    options: { agent: "nobody" },
    messages: [{ role: "user", content: "aisle seat please" }],
  })
  expect(other.ok).toBe(true)
  expect(other.report.memory).toBeUndefined()
  expect(other.report.learnings).toBeUndefined()
  expect(other.report.tokens.memory).toBe(0)
})
