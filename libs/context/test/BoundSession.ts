/**
 * A session on a model that binds reasoning, played request by request
 * without HTTP: each body ctxd renders goes through the fake provider's pure
 * prefix check (`FakeProvider.PrefixCheck`), and the reply — thinking signed
 * by the same check, then tool calls or a text — is appended to the history
 * as a client would, with the tool results after it.
 */
import { Anthropic as AnthropicContract, type Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import { Schema } from "effect"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"

type Json = Record<string, unknown>
const decodeMessages = Schema.decodeUnknownSync(Schema.Array(AnthropicContract.Message))

/** One user turn: the calls the model makes one request after another (result sizes in characters), then its answer. */
export interface Turn {
  readonly results: ReadonlyArray<number>
  /** Thinking blocks per reply (interleaved: before each call). */
  readonly blocks: number
  /** The tool list changes at this turn (a toolset loaded). */
  readonly newTool?: boolean | undefined
  /** A loop nudge rides after the newest message at this turn's first request. */
  readonly nudge?: boolean | undefined
  /** The turn ends on a tool call: its result, then the next turn's user message (one rendered user message). */
  readonly interrupt?: boolean | undefined
}

/** What one request looked like. */
export interface Sent {
  readonly body: Json
  readonly report: Pipeline.Output["report"]
  /** The previous reply's newest thinking block went with this request. */
  readonly keptLatest: boolean
  readonly outcome: ReturnType<typeof FakeProvider.PrefixCheck.check>
}

export interface Setup {
  readonly model: string
  readonly options: Pipeline.Options
  /** Plan with the cache planner (a warm cache, 10 turns to come). */
  readonly planner: boolean
  /** Retrieved memory after the newest message each request. */
  readonly memory?: string | undefined
  readonly contextWindow?: number | undefined
  /** Characters of each thinking block (default 1,200: a few hundred tokens, a modest real block). */
  readonly thinkingChars?: number | undefined
}

const estimate = (value: unknown): number => Math.ceil(JSON.stringify(value).length / 4)

/** Plays `turns` and returns every request. */
export const play = (setup: Setup, turns: ReadonlyArray<Turn>): Array<Sent> => {
  const model = { provider: "anthropic" as const, name: setup.model, contextWindow: setup.contextWindow ?? 200_000, maxOutputTokens: 8_000 }
  const resolved = { ...model, effectiveWindow: model.contextWindow - model.maxOutputTokens }
  const history: Array<Pipeline.StoredMessage> = []
  const push = (messages: ReadonlyArray<Conversation.Message>) => {
    for (const message of messages) history.push({ seq: history.length + 1, message, tokens: estimate(message) })
  }
  let tools: Array<Conversation.Tool> = [{ name: "lookup", inputSchema: { type: "object", properties: { id: { type: "string" } } } }]
  let previous: Pipeline.Output | undefined
  let latest: string | undefined
  let call = 0
  const out: Array<Sent> = []
  turns.forEach((turn, t) => {
    if (turn.newTool === true) tools = [...tools, { name: `tool_${t}`, description: "More.", inputSchema: { type: "object" } }]
    push([{ role: "user", parts: [{ type: "text", text: `task ${t}` }] }])
    for (let r = 0; r <= turn.results.length; r++) {
      const run = Pipeline.run({
        tenant: "t",
        session: "s",
        format: "anthropic",
        model: resolved,
        system: [{ id: "system", text: "You are an agent.", cache: "5m" }],
        systemTokens: 10,
        tools,
        toolsTokens: estimate(tools),
        history,
        options: setup.options,
        counter: { backend: "test", encoding: "o200k_base", exact: false, calibration: 1 },
        landmarks: previous?.landmarks,
        maskGrid: previous?.maskGrid,
        proactiveRung: previous?.proactiveRung,
        bound: previous?.shape?.bound,
        ...(setup.memory === undefined ? {} : { memory: { text: setup.memory, tokens: 10, placement: "tail" as const } }),
        ...(turn.nudge === true && r === 0 ? { trailer: { text: "You are repeating yourself.", tokens: 6 } } : {}),
        ...(setup.planner
          ? {
              cachePlan: {
                previous: previous?.shape,
                read: 0.1,
                write: 1.25,
                expectedTurns: 10,
                cold: false,
                ttlSeconds: 300,
                minCacheable: 0,
              },
            }
          : {}),
      })
      previous = run
      const request = run.request
      const control = isRecord(request["thinking"]) ? request["thinking"] : {}
      const body: Json = { ...request, max_tokens: 4096, thinking: { ...control, type: "enabled", budget_tokens: 1024 } }
      const betas = run.report.reasoning?.blockBinding === undefined ? [] : [run.report.reasoning.blockBinding.betaHeader]
      const sentText = JSON.stringify(body["messages"])
      out.push({
        body,
        report: run.report,
        keptLatest: latest !== undefined && sentText.includes(latest),
        outcome: FakeProvider.PrefixCheck.check(body, betas),
      })
      // the reply: thinking blocks (interleaved before each call), then a call or the answer
      const content: Array<Json> = []
      const last = r === turn.results.length && turn.interrupt !== true
      for (let b = 0; b < Math.max(1, turn.blocks); b++) {
        const thought = `thought ${t}.${r}.${b} `
        content.push({
          type: "thinking",
          thinking: thought.repeat(Math.ceil((setup.thinkingChars ?? 1_200) / thought.length)),
          signature: "",
        })
        if (!last && b < turn.blocks - 1) content.push({ type: "text", text: `step ${b}` })
      }
      const id = `toolu_${call++}`
      content.push(last ? { type: "text", text: `done ${t}` } : { type: "tool_use", id, name: "lookup", input: { id: `${t}.${r}` } })
      const signed = FakeProvider.PrefixCheck.sign(body, setup.model, content)
      latest = String(signed.filter((b) => b["type"] === "thinking").at(-1)?.["signature"])
      const replies: Array<unknown> = [{ role: "assistant", content: signed }]
      if (!last)
        replies.push({ role: "user", content: [{ type: "tool_result", tool_use_id: id, content: "x".repeat(turn.results[r] ?? 10) }] })
      push(Normalize.fromAnthropic(decodeMessages(replies)))
    }
  })
  return out
}

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
