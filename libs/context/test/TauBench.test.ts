/**
 * End to end over real sessions: the bundled tau-bench airline trajectories
 * (GPT-4o, OpenAI format, `examples/data`), replayed turn by turn as the
 * assembler would see them.
 */
import { OpenAI } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { Schema } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import type * as Window from "../src/Window.ts"
import { anthropicPairingProblems, anthropicShapeProblems, openaiPairingProblems } from "./Helpers.ts"

const data = Workloads.dataDir()
const sessions = JSON.parse(readFileSync(join(data, "tau-bench-airline-gpt4o.json"), "utf8")) as Array<{
  readonly task_id: number
  readonly traj: ReadonlyArray<unknown>
}>
const toolDefs = (JSON.parse(readFileSync(join(data, "tau-bench-tools.json"), "utf8")) as { airline: ReadonlyArray<unknown> }).airline
const decodeMessages = Schema.decodeUnknownSync(Schema.Array(OpenAI.Message), { onExcessProperty: "ignore" })
const decodeTools = Schema.decodeUnknownSync(Schema.Array(OpenAI.Tool), { onExcessProperty: "ignore" })

/** A rough local count: about four characters a token. */
const estimate = (value: unknown): number => Math.ceil(JSON.stringify(value).length / 4)

const tools = Normalize.tools("openai", decodeTools(toolDefs))

/**
 * Replays raw OpenAI messages: every assistant message is a model call, so
 * the messages before it form one turn's history. Returns the number of turns.
 */
const replay = (raw: ReadonlyArray<unknown>, options: Pipeline.Options): number => {
  const incoming = Normalize.fromOpenAIIndexed(decodeMessages(raw))
  const history: Array<Pipeline.StoredMessage> = []
  const known = new Set<string>()
  const answered = new Set<string>()
  let landmarks: Window.Landmarks | undefined
  let pending: Array<Normalize.NormalizedMessage> = []
  let turns = 0
  const flush = () => {
    expect(Normalize.findPairingError(known, answered, pending)).toBeUndefined()
    for (const { message } of pending) {
      history.push({ seq: history.length + 1, message, tokens: estimate(message) })
      Normalize.recordPairing(known, answered, message)
    }
    pending = []
  }
  for (const n of incoming) {
    if (n.message.role === "assistant" && history.length + pending.length > 0) {
      flush()
      turns++
      for (const format of ["anthropic", "openai"] as const) {
        const out = Pipeline.run({
          tenant: "tau",
          session: "airline",
          format,
          model: Models.resolve({ provider: format, name: format === "anthropic" ? "claude-sonnet-4-5" : "gpt-4o" }),
          system: [],
          systemTokens: 0,
          tools,
          toolsTokens: estimate(tools),
          history,
          options,
          counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
          landmarks,
        })
        if (format === "anthropic") {
          expect(anthropicPairingProblems(out.request)).toEqual([])
          expect(anthropicShapeProblems(out.request, out.report.cache.breakpoints)).toEqual([])
          // The policy (a pinned system message) rides in the system blocks.
          expect(String((out.request["system"] as Array<Record<string, unknown>>)[0]!["text"])).toContain("Airline Agent Policy")
        } else {
          expect(openaiPairingProblems(out.request)).toEqual([])
          landmarks = out.landmarks
        }
        expect(out.report.messages.anchorSeq).toBe(2)
        if (!out.report.overBudget) expect(out.report.tokens.total).toBeLessThanOrEqual(out.report.tokens.budget)
      }
    }
    pending.push(n)
  }
  return turns
}

describe("tau-bench airline sessions", () => {
  it("include sessions that reuse a tool call id once it is answered", () => {
    const ids = sessions
      .find((s) => s.task_id === 3)!
      .traj.flatMap((m) => ((m as { tool_calls?: ReadonlyArray<{ id: string }> }).tool_calls ?? []).map((c) => c.id))
    expect(new Set(ids).size).toBeLessThan(ids.length)
  })

  it("assemble turn by turn in both formats without orphans, under defaults", () => {
    let turns = 0
    for (const s of sessions) turns += replay(s.traj, Pipeline.resolveOptions(undefined))
    expect(turns).toBeGreaterThan(100)
  })

  it("assemble with a tiny window and a tight budget (many cuts) without orphans", () => {
    const options = Pipeline.resolveOptions({ windowMessages: 6, windowStep: 3, freshTailMessages: 3, budgetTokens: 9_000 })
    let turns = 0
    for (const s of sessions) turns += replay(s.traj, options)
    expect(turns).toBeGreaterThan(100)
  })

  it("assemble a long session made of many sessions back to back", () => {
    // Keep the first session's system message; later sessions contribute the rest.
    const raw = [...sessions[0]!.traj, ...sessions.slice(1).flatMap((s) => s.traj.slice(1))]
    expect(raw.length).toBeGreaterThan(200)
    const turns = replay(raw, Pipeline.resolveOptions({ budgetTokens: 20_000 }))
    expect(turns).toBeGreaterThan(100)
  })
})
