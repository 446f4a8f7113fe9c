import { CacheSim, CostModel, Models, RenderAnthropic } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Blocks from "./Blocks.ts"
import * as Gaps from "./Gaps.ts"
import * as Strategies from "./Strategies.ts"

const user = (text: string): Conversation.Message => ({ role: "user", parts: [{ type: "text", text }] })
const call = (id: string, name = "bash"): Conversation.Message => ({
  role: "assistant",
  parts: [{ type: "tool_call", id, name, input: { command: id } }],
})
const result = (id: string, text: string): Conversation.Message => ({
  role: "tool",
  parts: [{ type: "tool_result", callId: id, content: [{ type: "text", text }], isError: false }],
})

/** user, then n tool rounds c0..c(n-1) with result text "out i" (or `text(i)`). */
const session = (n: number, text: (i: number) => string = (i) => `out ${i}`): Array<Conversation.Message> => [
  user("task"),
  ...Array.from({ length: n }, (_, i) => [call(`c${i}`), result(`c${i}`, text(i))]).flat(),
]

/** Every message counts `tokens`, system and tools nothing unless given. */
const context = (tokens = 10, fixed = 0): Strategies.Context => ({ tokensOf: () => tokens, systemTokens: fixed, toolsTokens: 0 })

const resultTexts = (view: ReadonlyArray<Conversation.Message>): Array<string> =>
  view.flatMap((m) => m.parts.flatMap((p) => (p.type === "tool_result" ? p.content.map((c) => (c.type === "text" ? c.text : "")) : [])))

describe("peer strategies", () => {
  it("full history sends everything", () => {
    const h = session(3)
    expect(Strategies.full(h, context())).toBe(h)
  })

  it("sliding window keeps the last n messages and drops leading orphan results", () => {
    const h = session(5) // 11 messages: user, c0, r0, ..., c4, r4
    const view = Strategies.sliding(4)(h, context())
    expect(view.map((m) => m.role)).toEqual(["assistant", "tool", "assistant", "tool"])
    const odd = Strategies.sliding(3)(h, context()) // would start with r3's call cut? last 3 = r3, c4, r4 → r3 orphan dropped
    expect(odd.map((m) => m.role)).toEqual(["assistant", "tool"])
    expect(Strategies.sliding(40)(h, context())).toEqual(h)
  })

  it("clear_tool_uses does nothing under the trigger, then clears all but the last 3 results", () => {
    const h = session(6)
    expect(Strategies.clearToolUses({ trigger: 1_000 })(h, context())).toBe(h)
    const view = Strategies.clearToolUses({ trigger: 100 })(h, context()) // 13 messages × 10 > 100
    expect(resultTexts(view)).toEqual(["[cleared]", "[cleared]", "[cleared]", "out 3", "out 4", "out 5"])
    // The calls stay (clear_tool_inputs false).
    expect(view.filter((m) => m.role === "assistant")).toHaveLength(6)
    // System and tools count towards the trigger.
    expect(Strategies.clearToolUses({ trigger: 200 })(h, context(10, 100))).not.toBe(h)
  })

  it("clear_tool_uses honours exclude_tools and clear_at_least", () => {
    const h = [user("task"), call("a", "memory"), result("a", "keep me"), ...session(4).slice(1)]
    const view = Strategies.clearToolUses({ trigger: 0, excludeTools: ["memory"] })(h, context())
    expect(resultTexts(view)).toEqual(["keep me", "[cleared]", "out 1", "out 2", "out 3"])
    // Clearing one 10-token result frees 7 tokens: below a 50-token minimum nothing is cleared.
    expect(Strategies.clearToolUses({ trigger: 0, clearAtLeast: 50 })(session(4), context())).toEqual(session(4))
  })

  it("observation masking keeps the last 10 results and notes the line count of older ones", () => {
    const h = session(12, (i) => `line a ${i}\nline b`)
    const texts = resultTexts(Strategies.observationMasking(10)(h, context()))
    expect(texts.slice(0, 2)).toEqual(["Old environment output: (2 lines omitted)", "Old environment output: (2 lines omitted)"])
    expect(texts.slice(2)).toEqual(Array.from({ length: 10 }, (_, i) => `line a ${i + 2}\nline b`))
  })

  it("trimMessages keeps the newest messages that fit, from a human message on", () => {
    const h = [user("first"), ...session(3).slice(1), user("second"), ...session(2).slice(1)]
    // 13 messages of 10 tokens, system 5: 60 tokens fit 5 messages, the first human among them is "second"…
    const view = Strategies.trimMessages(60)(h, context(10, 5))
    expect(view[0]).toEqual(user("second"))
    expect(view).toHaveLength(5)
    // …and with no human message in the window nothing is left.
    expect(Strategies.trimMessages(35)(h, context(10, 5))).toEqual([])
    expect(Strategies.trimMessages(1_000)(h, context(10, 5))).toEqual(h)
  })
})

describe("gap model", () => {
  const turns = [[user("hi")], [call("a"), result("a", "x")], [user("more")], [call("b"), result("b", "y")]]

  it("spaces agent steps 2–20 s apart, deterministically per seed and session", () => {
    const times = Gaps.timestamps("s", turns, { seed: 1, pauses: false })
    expect(times[0]).toBe(0)
    for (let k = 1; k < times.length; k++) {
      expect(times[k]! - times[k - 1]!).toBeGreaterThanOrEqual(2)
      expect(times[k]! - times[k - 1]!).toBeLessThan(20)
    }
    expect(Gaps.timestamps("s", turns, { seed: 1, pauses: false })).toEqual(times)
    expect(Gaps.timestamps("other", turns, { seed: 1, pauses: false })).not.toEqual(times)
  })

  it("adds a 3–40 minute pause before each later turn with a human message", () => {
    const quiet = Gaps.timestamps("s", turns, { seed: 1, pauses: false })
    const paused = Gaps.timestamps("s", turns, { seed: 1, pauses: true })
    const extra = paused.map((t, k) => t - quiet[k]!)
    expect(extra[0]).toBe(0)
    expect(extra[1]).toBe(0)
    expect(extra[2]).toBeGreaterThanOrEqual(180)
    expect(extra[2]).toBeLessThan(2_400)
    expect(extra[3]).toBe(extra[2])
  })
})

describe("rendered peers through the simulator", () => {
  const model = Models.resolve({ provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 1_000_000 })
  const count = Blocks.counting(model)
  const toBlocks = Blocks.converter(count)
  const big = (i: number) => `${"lorem ipsum dolor sit amet ".repeat(200)} ${i}`
  const system: Array<Conversation.SystemSection> = [{ id: "s", text: big(-1), cache: "5m" }]
  const requests = (strategy: Strategies.Strategy, turns: number): Array<CacheSim.Request> => {
    const h = session(turns, big)
    const ctx: Strategies.Context = { tokensOf: count.message, systemTokens: count.system(system), toolsTokens: 0 }
    return Array.from({ length: turns }, (_, t) => {
      const view = strategy(h.slice(0, 3 + 2 * t), ctx)
      return { at: t * 10, blocks: toBlocks(RenderAnthropic.render({ model, system, tools: [], messages: view }).body) }
    })
  }
  const sonnet = CostModel.lookup("claude-sonnet-4-5")

  it("full history: every turn reads the previous request and writes only the new tail", () => {
    const usages = CacheSim.simulate(sonnet, requests(Strategies.full, 5))
    for (let t = 1; t < usages.length; t++) {
      const u = usages[t]!
      expect(u.cacheRead).toBeGreaterThan(CostModel.written(u))
      expect(u.cacheRead + CostModel.written(u) + u.uncached).toBeGreaterThan(usages[t - 1]!.cacheRead)
    }
  })

  it("observation masking M=2 rewrites from the newly masked result on", () => {
    const masked = CacheSim.simulate(sonnet, requests(Strategies.observationMasking(2), 6))
    const plain = CacheSim.simulate(sonnet, requests(Strategies.full, 6))
    expect(CostModel.written(masked[5]!)).toBeGreaterThan(CostModel.written(plain[5]!))
  })
})
