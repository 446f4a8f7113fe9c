/** The feature enables among the turn options: `promptCache` and `compaction` (the others: `loop.policy: off`, `tokenBackend`). */
import type { Turn } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

const tools = [
  { name: "read_file", description: "Reads a file.", input_schema: { type: "object", properties: { path: { type: "string" } } } },
]

describe("options.promptCache", () => {
  const turn = async (format: "anthropic" | "openai", options: Record<string, unknown>, name?: string) => {
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const model =
      format === "anthropic" ? { provider: "anthropic", name: "claude-sonnet-4-5" } : { provider: "openai", name: name ?? "gpt-4o" }
    const req = {
      turnId: "t1",
      format,
      model,
      system: [{ id: "rules", text: "Be brief. ".repeat(2_000) }],
      ...(format === "anthropic" ? { tools } : {}),
      messages: [{ role: "user", content: "hello" }],
      options,
    }
    return turns.turn("acme", "s1", req as unknown as Turn.TurnRequest)
  }

  it("true (the default): breakpoints and the cache key; false: none of them, and no reads or writes expected (Anthropic)", async () => {
    const on = await turn("anthropic", {})
    expect(on.report.cache.breakpoints).toBeGreaterThan(0)
    expect(JSON.stringify(on.request)).toContain("cache_control")
    const off = await turn("anthropic", { promptCache: false })
    expect(JSON.stringify(off.request)).not.toContain("cache_control")
    expect(off.report.cache).toMatchObject({ breakpoints: 0, expectedReadTokens: 0, expectedWriteTokens: 0 })
    // the same prompt otherwise
    expect(JSON.stringify(off.request)).toBe(JSON.stringify(on.request).replaceAll(/,"cache_control":\{[^}]*\}/g, ""))

    expect((await turn("openai", {})).request).toHaveProperty("prompt_cache_key")
    const openaiOff = await turn("openai", { promptCache: false })
    expect(openaiOff.request).not.toHaveProperty("prompt_cache_key")
    expect(openaiOff.report.cache.promptCacheKey).toBeNull()
  })

  it("false on a model with explicit OpenAI breakpoints: no prompt_cache_breakpoint and no prompt_cache_options", async () => {
    const on = await turn("openai", {}, "gpt-5.6")
    expect(on.report.cache.breakpoints).toBeGreaterThan(0)
    expect(JSON.stringify(on.request)).toContain("prompt_cache_breakpoint")
    expect(on.request).toHaveProperty("prompt_cache_options")
    const off = await turn("openai", { promptCache: false }, "gpt-5.6")
    expect(JSON.stringify(off.request)).not.toContain("prompt_cache_breakpoint")
    expect(off.request).not.toHaveProperty("prompt_cache_options")
    expect(off.report.cache.breakpoints).toBe(0)
  })
})

describe("options.compaction", () => {
  const play = async (options: Record<string, unknown>) => {
    let jobs = 0
    const turns = InProcessTurns.make({
      local,
      count: InProcessTurns.countLocally(local),
      thresholds: { compactAtPct: 0.95, softPct: 0.2, tailKeepTokens: 1_000, tailMaxPct: 0.3, minFoldPct: 0.01 },
      compact: (_job, stored) => {
        jobs++
        return Promise.resolve({
          id: stored.length,
          coversFromSeq: 1,
          coversToSeq: stored.at(-3)!.seq,
          text: "Summary.",
          mode: "one_shot",
          depth: 1,
        })
      },
    })
    const body = "log line ".repeat(400)
    const replies: Array<Turn.TurnReply> = []
    for (let k = 0; k < 14; k++) {
      const messages =
        k === 0
          ? [{ role: "user", content: body }]
          : [
              { role: "assistant", content: `noted ${k}` },
              { role: "user", content: body },
            ]
      const model = { provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 40_000, maxOutputTokens: 4_000 }
      const req = { turnId: `t${k}`, format: "anthropic", model, system: "Be brief.", messages, options }
      replies.push(await turns.turn("acme", "c", req as unknown as Turn.TurnRequest, undefined, k * 2_000))
    }
    return { jobs, replies }
  }

  it("on by default: the session is compacted; false: no compaction is scheduled or waited for", async () => {
    const on = await play({})
    expect(on.jobs).toBeGreaterThan(0)
    expect(on.replies.some((r) => r.report.compaction?.trigger === "background")).toBe(true)
    const off = await play({ compaction: false })
    expect(off.jobs).toBe(0)
    expect(off.replies.every((r) => r.report.compaction === undefined)).toBe(true)
  })
})
