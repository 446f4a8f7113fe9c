/**
 * A 500-turn replay (tau-bench sessions back to back, one long session)
 * through the pure pipeline with a 16k-token model: every turn assembles
 * `applySummary(history, live)`, compaction runs through the real
 * summarizer and the fake provider whenever the planner says so (a
 * background summary lands on the next turn, a blocking one at once), and
 * every rendered body, in both formats, is sent to the fake provider with
 * the real SDKs — which rejects orphaned tool pairs, bad role order and
 * prompts over the window. Utilization stays ≤ 1 on every turn.
 */
import Anthropic from "@anthropic-ai/sdk"
import { Models, Normalize, Pipeline } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { FakeProvider, Workloads } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { Plan, View } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"
import { Summarizer } from "@ctxd/summarizer"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start({ contextWindow: 16_000 })
})
afterAll(() => server.close())

const TURNS = 500
const MODEL = Fixture.MODEL
const resolved = Models.resolve(MODEL)
const W = resolved.effectiveWindow

/** The replay: tau-bench turns back to back, call ids made unique per session. */
const turns = (): Array<ReadonlyArray<Conversation.Message>> => {
  const out: Array<ReadonlyArray<Conversation.Message>> = []
  const sessions = Workloads.tauBenchSessions()
  for (let s = 0; out.length < TURNS; s++) {
    for (const turn of sessions[s % sessions.length]!.turns) {
      if (out.length === TURNS) break
      out.push(
        Normalize.fromOpenAI(turn.messages).map((m) => ({
          ...m,
          parts: m.parts.map((p) =>
            p.type === "tool_call" ? { ...p, id: `${s}-${p.id}` } : p.type === "tool_result" ? { ...p, callId: `${s}-${p.callId}` } : p,
          ),
        })),
      )
    }
  }
  return out
}

type Json = Record<string, unknown>
const list = (u: unknown): Array<Json> => (Array.isArray(u) ? (u as Array<Json>) : [])

/** Orphaned calls or results in an OpenAI body. */
const openaiOrphans = (body: Json): number => {
  let orphans = 0
  let open = new Set<string>()
  for (const m of list(body["messages"])) {
    if (m["role"] === "tool") {
      if (!open.delete(String(m["tool_call_id"]))) orphans++
      continue
    }
    orphans += open.size
    open = new Set(list(m["tool_calls"]).map((c) => String(c["id"])))
  }
  return orphans + open.size
}

/** Orphaned tool_use or tool_result blocks in an Anthropic body. */
const anthropicOrphans = (body: Json): number => {
  let orphans = 0
  let open = new Set<string>()
  for (const m of list(body["messages"])) {
    const blocks = list(m["content"])
    if (m["role"] === "user") {
      for (const b of blocks) if (b["type"] === "tool_result" && !open.delete(String(b["tool_use_id"]))) orphans++
      orphans += open.size
      open = new Set()
    } else {
      orphans += open.size
      open = new Set(blocks.filter((b) => b["type"] === "tool_use").map((b) => String(b["id"])))
    }
  }
  return orphans + open.size
}

describe("500-turn replay with compaction", () => {
  it.live(
    "stays inside the window on every turn, with no orphaned tool pair, in both formats",
    () =>
      Effect.gen(function* () {
        const summarizer = yield* Summarizer.Summarizer.pipe(Effect.provide(Fixture.summarizer(server)))
        const anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
        const openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
        const [tau] = Workloads.tauBenchSessions()
        const system = Normalize.system(tau!.system)
        const tools = Normalize.tools("openai", tau!.tools)
        const systemTokens = Fixture.counter.countSystem(system, "o200k_base")
        const toolsTokens = Fixture.counter.countTools(tools, "o200k_base")
        const fixed = systemTokens + toolsTokens
        const count = (m: Conversation.Message) => Fixture.counter.countMessage(m, "o200k_base")

        const history: Array<Pipeline.StoredMessage> = []
        let live: View.Summary | undefined
        let ready: View.Summary | undefined
        const stats = { compactions: 0, blocking: 0, noBoundary: 0, maxUtilization: 0, summarizerTokens: 0, turnsWithSummary: 0 }

        const compact = (minFoldTokens: number) =>
          Effect.gen(function* () {
            const cut = Plan.planCut(history, live, W, Plan.defaults, { fixedTokens: fixed, minFoldTokens })
            if (cut._tag === "NoBoundary") {
              stats.noBoundary++
              return undefined
            }
            const items = history.slice(cut.fromIndex, cut.toIndex).map((m) => ({ seq: m.seq, message: m.message }))
            const s = yield* summarizer.summarize({ items, sessionModel: MODEL, previous: live?.text })
            stats.compactions++
            stats.summarizerTokens += s.tokensIn + s.tokensOut
            return {
              id: stats.compactions,
              coversFromSeq: cut.coversFromSeq,
              coversToSeq: cut.coversToSeq,
              text: s.text,
              mode: s.mode,
              depth: s.depth,
            }
          })

        for (const [t, messages] of turns().entries()) {
          for (const message of messages) history.push({ seq: history.length + 1, message, tokens: count(message) })
          if (ready !== undefined) {
            live = ready
            ready = undefined
          }
          let view = View.applySummary(history, live, count)
          const decision = Plan.decide(Plan.estimate(view.messages, fixed), W)
          if (decision.trigger === "blocking") {
            stats.blocking++
            const s = yield* compact(0)
            if (s !== undefined) {
              live = s
              view = View.applySummary(history, live, count)
            }
          } else if (decision.trigger === "background" && ready === undefined) {
            ready = yield* compact(Math.floor(Plan.defaults.minFoldPct * W))
          }
          if (live !== undefined) stats.turnsWithSummary++

          for (const format of ["anthropic", "openai"] as const) {
            const assembled = Pipeline.run({
              tenant: "acme",
              session: "replay",
              format,
              model: format === "anthropic" ? Models.resolve({ ...MODEL, provider: "anthropic", name: "claude-sonnet-4-6" }) : resolved,
              system,
              systemTokens,
              tools,
              toolsTokens,
              history: view.messages,
              options: Pipeline.resolveOptions(undefined),
              counter: { backend: "tiktoken", encoding: "o200k_base", exact: false, calibration: 1 },
            })
            const { report, request } = assembled
            stats.maxUtilization = Math.max(stats.maxUtilization, report.utilization)
            expect(report.utilization, `turn ${t} ${format}`).toBeLessThanOrEqual(1)
            expect(report.overBudget, `turn ${t} ${format}`).toBe(false)
            expect(format === "anthropic" ? anthropicOrphans(request) : openaiOrphans(request), `turn ${t} ${format}`).toBe(0)
            if (live !== undefined) expect(JSON.stringify(request)).toContain(View.header(live))
            // the provider's own validation: pairing, roles, and its count of the prompt against the window
            const sent = yield* Effect.promise(() =>
              format === "anthropic"
                ? anthropic.messages.create(request as never).then(
                    () => "ok",
                    (e: unknown) => String(e),
                  )
                : openai.chat.completions.create(request as never).then(
                    () => "ok",
                    (e: unknown) => String(e),
                  ),
            )
            expect(sent, `turn ${t} ${format}`).toBe("ok")
          }
        }
        console.log(`replay: ${TURNS} turns, ${history.length} messages, ${JSON.stringify(stats)}`)
        expect(stats.compactions).toBeGreaterThan(5)
        expect(stats.turnsWithSummary).toBeGreaterThan(TURNS / 2)
        // compaction is rare and in large steps, not every turn (lesson 2)
        expect(stats.compactions).toBeLessThan(TURNS / 5)
      }),
    120_000,
  )
})
