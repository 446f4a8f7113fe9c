/**
 * What leaving older thinking out costs under Anthropic's prompt cache:
 * tau-bench sessions with synthetic thinking in every assistant message,
 * replayed through the pipeline with the cache planner (agent steps only, a
 * warm cache), billed by `CacheSim`. Three policies: keep every thinking
 * block (`keepThinkingTurns` large), drop a turn's thinking the moment it
 * leaves the last one (the planner's hold switched off by hiding the held
 * frontier), and ctxd's (drop, held while it does not pay).
 */
import { CacheSim, CostModel, Models, Normalize, Pipeline } from "@ctxd/context"
import type { CachePlanner } from "@ctxd/context"
import type { Conversation, OpenAI } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { describe, expect, it } from "vitest"
import * as Blocks from "./Blocks.ts"

const model = Models.resolve({ provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 1_000_000 })
const prices = CostModel.lookup(model.name)
const count = Blocks.counting(model)

/** Thinking of 150–1,350 tokens (deterministic per message) before every assistant message. */
const withThinking = (turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>): Array<Array<Conversation.Message>> => {
  let k = 0
  return turns.map((messages) =>
    messages.map((m): Conversation.Message => {
      if (m.role !== "assistant") return m
      const n = k++
      const text = `Thought ${n}: weigh the policy against the request before acting. `.repeat(10 + ((n * 37) % 90))
      return {
        ...m,
        parts: [{ type: "opaque", format: "anthropic", block: { type: "thinking", thinking: text, signature: `sig${n}` } }, ...m.parts],
      }
    }),
  )
}

type Policy = "keep all" | "drop at once" | "ctxd"

const replay = (
  turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>,
  system: ReadonlyArray<Conversation.SystemSection>,
  tools: ReadonlyArray<Conversation.Tool>,
  policy: Policy,
): number => {
  const history: Array<Pipeline.StoredMessage> = []
  const options = Pipeline.resolveOptions({ ...Pipeline.defaults, ...(policy === "keep all" ? { keepThinkingTurns: 1_000 } : {}) })
  let previous: CachePlanner.Candidate | undefined
  const requests: Array<CacheSim.Request> = []
  const toBlocks = Blocks.converter(count)
  turns.forEach((messages, k) => {
    for (const message of messages) history.push({ seq: history.length + 1, message, tokens: count.message(message) })
    const plan: CachePlanner.Plan = {
      previous: policy === "drop at once" && previous !== undefined ? { ...previous, thinking: undefined } : previous,
      read: prices.cacheReadMultiplier,
      write: prices.tiers[0]!.writeMultiplier,
      expectedTurns: Math.max(1, Math.ceil(k / 2)),
      cold: false,
      ttlSeconds: 300,
      minCacheable: prices.minCacheableTokens,
    }
    const out = Pipeline.run({
      tenant: "bench",
      session: "s",
      format: "anthropic",
      model,
      system,
      systemTokens: count.system(system),
      tools,
      toolsTokens: count.tools(tools),
      history,
      options,
      counter: { backend: "tiktoken", encoding: count.encoding, exact: false, calibration: 1 },
      cachePlan: plan,
      countText: count.text,
    })
    previous = out.shape
    requests.push({ at: k * 10, blocks: toBlocks(out.request) })
  })
  const usage = CacheSim.simulate(prices, requests).reduce(CostModel.add, CostModel.zero)
  return CostModel.inputUnits(prices, usage)
}

describe("leaving older thinking out, under the prompt cache", () => {
  it("ctxd's hold costs no more than dropping at once, and less than keeping every thought", () => {
    const sessions = Workloads.tauBenchSessions()
    const totals: Record<Policy, number> = { "keep all": 0, "drop at once": 0, ctxd: 0 }
    for (const s of sessions) {
      const turns = withThinking(s.turns.map((t) => Normalize.fromOpenAI(t.messages as ReadonlyArray<OpenAI.Message>)))
      const system = Normalize.system(s.system)
      const tools = Normalize.tools("openai", s.tools)
      for (const policy of Object.keys(totals) as Array<Policy>) totals[policy] += replay(turns, system, tools, policy)
    }
    console.log("effective input cost (tok-eq):", JSON.stringify(totals))
    expect(totals.ctxd).toBeLessThanOrEqual(totals["drop at once"])
    expect(totals.ctxd).toBeLessThan(totals["keep all"])
  })
})
