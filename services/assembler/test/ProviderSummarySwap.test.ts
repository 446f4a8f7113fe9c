// A provider-written summary in the turn: the job names the backend the model's row and the options choose, and
// the signed block is swapped in on the first turn after it lands (the background compaction docs), where a ctxd
// summary of the same span would be held back by the cache planner.
import type { WorkQueue } from "@ctxd/compactor"
import type { Turn } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

const block = { type: "compaction", content: "Summary: the logs were read.", encrypted_content: "e30", signature: "fakecmp1.x" }

const play = async (name: string, written: "provider" | "ctxd", options: Record<string, unknown> = {}) => {
  const jobs: Array<WorkQueue.Job> = []
  const body = "log line ".repeat(400)
  const turns = InProcessTurns.make({
    local,
    count: InProcessTurns.countLocally(local),
    thresholds: { compactAtPct: 0.95, softPct: 0.2, tailKeepTokens: 1_000, tailMaxPct: 0.3, minFoldPct: 0.01 },
    compact: (job, stored) => {
      jobs.push(job)
      return Promise.resolve({
        id: stored.length,
        coversFromSeq: 1,
        coversToSeq: stored.at(-3)!.seq,
        text: block.content,
        mode: "one_shot",
        depth: 1,
        ...(written === "provider" ? { block } : {}),
      })
    },
  })
  const replies: Array<Turn.TurnReply> = []
  for (let k = 0; k < 14; k++) {
    const messages =
      k === 0
        ? [{ role: "user", content: body }]
        : [
            { role: "assistant", content: `noted ${k}` },
            { role: "user", content: body },
          ]
    const model = { provider: "anthropic", name, contextWindow: 40_000, maxOutputTokens: 4_000 }
    // a session expected to end now: a ctxd summary never earns its re-write and is held back
    const req = { turnId: `t${k}`, format: "anthropic", model, system: "Be brief.", messages, options: { expectedTurns: 0, ...options } }
    replies.push(await turns.turn("acme", "swap", req as unknown as Turn.TurnRequest, undefined, k * 2_000))
  }
  return { replies, jobs }
}

const first = (r: Turn.TurnReply) => (r.request["messages"] as Array<{ content: Array<Record<string, unknown>> }>)[0]!.content[0]

describe("a provider-written summary in the turn", () => {
  it("is asked for by default on a model with on-demand compaction that binds thinking, and swapped in at once", async () => {
    const { replies, jobs } = await play("claude-opus-5-5", "provider")
    expect(jobs.length).toBeGreaterThan(0)
    expect(jobs.every((j) => j.backend === "provider")).toBe(true)
    const landed = replies.findIndex((r) => r.report.compaction?.summary != null)
    expect(landed).toBeGreaterThan(0)
    expect(replies[landed]!.report.compaction?.summary?.writtenBy).toBe("provider")
    expect(first(replies[landed]!)).toMatchObject(block)
    expect(replies.slice(landed).every((r) => r.report.cache.summaryDeferred !== true)).toBe(true)
  })

  it("a ctxd summary of the same span is held back; the tenant's option picks ctxd; other models never ask", async () => {
    const held = await play("claude-opus-5-5", "ctxd", { summarizer: { backend: "ctxd" } })
    expect(held.jobs.every((j) => j.backend === "ctxd")).toBe(true)
    expect(held.replies.some((r) => r.report.cache.summaryDeferred === true)).toBe(true)
    const older = await play("claude-sonnet-4-5", "ctxd", { summarizer: { backend: "provider" } })
    expect(older.jobs.every((j) => j.backend === "ctxd")).toBe(true)
  })
})
