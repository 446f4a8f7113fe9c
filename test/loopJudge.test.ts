// The optional LLM judge through a real worker: asked only when a pattern is
// one repeat short of its threshold and the judge is enabled; its "no
// progress" flags the loop a turn early; its answer and cost are reported.
import { FakeProvider } from "@ctxd/testing"
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

const turn = (turnId: string, messages: unknown[], judge: boolean) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  messages,
  options: { loop: { judge: { enabled: judge } } },
})
const sameCall = (i: number) => [
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: `c${i}`, type: "function", function: { name: "search", arguments: '{"q":"x"}' } }],
  },
  { role: "tool", tool_call_id: `c${i}`, content: "no results" },
]
const judgeCalls = () => fake.requests().filter((r) => r.endpoint === "chat_completions").length

it("asks the judge at the borderline and flags the loop when it sees no progress", async () => {
  const s = h.turnSubject("acme", "judged")
  await h.request(s, turn("t0", [{ role: "user", content: "find x" }], true))
  const first = await h.request(s, turn("t1", sameCall(1), true))
  expect(first.report.loop.judge).toBeUndefined()
  expect(judgeCalls()).toBe(0)
  fake.control({ replies: [{ provider: "openai", text: '{"progress": false, "reason": "the same empty search again"}' }] })
  const second = await h.request(s, turn("t2", sameCall(2), true))
  expect(judgeCalls()).toBe(1)
  expect(second.report.loop.judge).toMatchObject({
    answered: true,
    progress: false,
    reason: "the same empty search again",
    model: "gpt-4o",
  })
  expect(second.report.loop.judge.tokensIn).toBeGreaterThan(0)
  expect(second.report.loop).toMatchObject({ nudged: true, escalate: true, verdict: { looping: true } })
})

it("is off by default, and a judge that sees progress flags nothing", async () => {
  const s = h.turnSubject("acme", "unjudged")
  await h.request(s, turn("t0", [{ role: "user", content: "find x" }], false))
  await h.request(s, turn("t1", sameCall(1), false))
  const before = judgeCalls()
  const off = await h.request(s, turn("t2", sameCall(2), false))
  expect(judgeCalls()).toBe(before)
  expect(off.report.loop.judge).toBeUndefined()

  const p = h.turnSubject("acme", "progress")
  await h.request(p, turn("t0", [{ role: "user", content: "find x" }], true))
  await h.request(p, turn("t1", sameCall(1), true))
  fake.control({ replies: [{ provider: "openai", text: '{"progress": true, "reason": "narrowing down"}' }] })
  const ok = await h.request(p, turn("t2", sameCall(2), true))
  expect(ok.report.loop).toMatchObject({ nudged: false, escalate: false, judge: { progress: true } })
})
