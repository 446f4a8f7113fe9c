// Loop detection through a real worker: a looping session gets a nudge at the
// end of its next prompt and the flag in the report; escalate flags only.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
})
afterAll(async () => {
  await h?.close()
})

const base = (turnId: string, messages: unknown[], options?: unknown) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  tools: [{ type: "function", function: { name: "search", parameters: { type: "object", properties: { q: { type: "string" } } } } }],
  messages,
  ...(options === undefined ? {} : { options }),
})
const sameCall = (i: number) => [
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: `c${i}`, type: "function", function: { name: "search", arguments: '{"q":"flights"}' } }],
  },
  { role: "tool", tool_call_id: `c${i}`, content: "no results" },
]

const loopSession = async (session: string, options?: unknown) => {
  const replies = [await h.request(h.turnSubject("acme", session), base("t0", [{ role: "user", content: "find a flight" }], options))]
  for (let i = 1; i <= 3; i++) replies.push(await h.request(h.turnSubject("acme", session), base(`t${i}`, sameCall(i), options)))
  return replies
}

describe("loop detection in turns", () => {
  it("nudges at the end of the prompt once the same call repeats 3 times, not before", async () => {
    const replies = await loopSession("looping")
    expect(replies.every((r) => r.ok)).toBe(true)
    expect(replies[2].report.loop).toMatchObject({ policy: "nudge", nudged: false, escalate: false })
    const last = replies[3]
    expect(last.report.loop).toMatchObject({ policy: "nudge", nudged: true, escalate: true, verdict: { looping: true } })
    expect(last.report.loop.verdict.findings[0]).toMatchObject({ pattern: "repeated_call", repeats: 3 })
    const tail = last.request.messages.at(-1)
    expect(tail.role).toBe("user")
    expect(tail.content).toContain("search")
    // The nudge is not stored: the history holds exactly what the runtime sent.
    const stored = await h.sql<{ n: string }>(
      "select count(*) as n from ctxd_messages m join ctxd_sessions s on s.id = m.session_id where s.session = 'looping'",
    )
    expect(Number(stored[0]!.n)).toBe(7)
  })

  it("only flags under policy escalate", async () => {
    const replies = await loopSession("escalating", { loop: { policy: "escalate" } })
    const last = replies[3]
    expect(last.report.loop).toMatchObject({ policy: "escalate", nudged: false, escalate: true })
    expect(last.request.messages.at(-1).role).toBe("tool")
  })
})
