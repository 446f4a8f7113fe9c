/**
 * Reasoning against the official SDKs: tau-bench sessions replayed turn by
 * turn with synthetic signed thinking in every assistant message (Anthropic,
 * sent with `thinking: {type: "enabled", budget_tokens}`) and a reasoning
 * item before every run of assistant output (Responses), each turn's
 * ctxd-rendered body sent to the fake provider, which rejects thinking
 * outside assistant messages, unsigned thinking, and a tool-use continuation
 * whose final assistant message does not start with thinking, as the API does.
 */
import { Anthropic as AnthropicContract, OpenAIResponses } from "@ctxd/contracts"
import { FakeProvider, Workloads } from "@ctxd/testing"
import Anthropic from "@anthropic-ai/sdk"
import { Schema } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import { anthropicPairingProblems, responsesPairingProblems } from "./Helpers.ts"

type Json = Record<string, unknown>

const decodeMessages = Schema.decodeUnknownSync(Schema.Array(AnthropicContract.Message))
const decodeAnthropicTools = Schema.decodeUnknownSync(Schema.Array(AnthropicContract.Tool))
const decodeItems = Schema.decodeUnknownSync(Schema.Array(OpenAIResponses.Item))
const decodeResponsesTools = Schema.decodeUnknownSync(Schema.Array(OpenAIResponses.Tool))
const estimate = (value: unknown): number => Math.ceil(JSON.stringify(value).length / 4)
const isThinking = (b: Json): boolean => b["type"] === "thinking" || b["type"] === "redacted_thinking"
const contentOf = (m: Json): Array<Json> => (Array.isArray(m["content"]) ? (m["content"] as Array<Json>) : [])

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

const input = (
  format: Pipeline.Input["format"],
  id: string,
  history: ReadonlyArray<Pipeline.StoredMessage>,
  rest: Pick<Pipeline.Input, "model" | "system" | "tools" | "options">,
): Pipeline.Input => ({
  tenant: "tau",
  session: id,
  format,
  ...rest,
  systemTokens: estimate(rest.system),
  toolsTokens: estimate(rest.tools),
  history,
  counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
})

describe("reasoning through the official SDKs", () => {
  it("anthropic: a replayed tau-bench session with signed thinking: every body accepted with thinking enabled, older thinking left out", async () => {
    const session = Workloads.withThinking(Workloads.toAnthropic(Workloads.tauBenchSession("tau-airline-19-3")))
    const tools = Normalize.tools("anthropic", decodeAnthropicTools(session.tools))
    const system = Normalize.system(session.system)
    const model = Models.resolve({ provider: "anthropic", name: "claude-sonnet-4-6" })
    const options = Pipeline.resolveOptions({ windowMessages: 30, windowStep: 4, maskKeep: 3 })
    const history: Array<Pipeline.StoredMessage> = []
    let continuations = 0
    let dropped = 0
    for (const turn of session.turns) {
      for (const message of Normalize.fromAnthropic(decodeMessages(turn.messages))) {
        history.push({ seq: history.length + 1, message, tokens: estimate(message) })
      }
      const out = Pipeline.run(input("anthropic", session.id, history, { model, system, tools, options }))
      const body = out.request
      expect(anthropicPairingProblems(body)).toEqual([])
      const messages = body["messages"] as Array<Json>
      // thinking only in assistant messages; a continuation's final assistant message starts with it
      for (const m of messages) if (m["role"] === "user") expect(contentOf(m).some(isThinking)).toBe(false)
      const last = messages.at(-1)!
      if (contentOf(last).some((b) => b["type"] === "tool_result")) {
        continuations++
        expect(isThinking(contentOf(messages.at(-2)!)[0]!)).toBe(true)
      }
      // only the last thinking turn keeps its thinking: no assistant message before the last genuine user message has any
      const lastUser = messages.findLastIndex(
        (m) =>
          m["role"] === "user" && contentOf(m).some((b) => b["type"] === "text") && !contentOf(m).some((b) => b["type"] === "tool_result"),
      )
      const turnStart = Math.max(0, lastUser)
      const withThinking = messages.flatMap((m, i) => (m["role"] === "assistant" && contentOf(m).some(isThinking) ? [i] : []))
      if (withThinking.some((i) => i > turnStart)) expect(withThinking.every((i) => i > turnStart)).toBe(true)
      dropped += out.report.reasoning?.dropped ?? 0
      expect(out.report.stages?.map((s) => s.stage)).toContain("thinking")

      const response = await anthropic.messages.create({
        ...(body as unknown as Anthropic.MessageCreateParamsNonStreaming),
        thinking: { type: "enabled", budget_tokens: 1024 },
      })
      expect(response.type).toBe("message")
    }
    expect(continuations).toBeGreaterThan(2)
    expect(dropped).toBeGreaterThan(0)
  })

  it("openai-responses: a replayed session with reasoning items: every body accepted, each reasoning item followed by its output", async () => {
    const session = Workloads.withReasoning(Workloads.toResponses(Workloads.tauBenchSession("tau-airline-19-3")))
    const tools = Normalize.tools("openai-responses", decodeResponsesTools(session.tools))
    const system = Normalize.system(session.system)
    const model = Models.resolve({ provider: "openai", name: "gpt-4.1" })
    const options = Pipeline.resolveOptions({ windowMessages: 30, windowStep: 4, maskKeep: 3, keepThinkingTurns: 2 })
    const history: Array<Pipeline.StoredMessage> = []
    let sentReasoning = 0
    for (const turn of session.turns) {
      for (const message of Normalize.fromResponses(decodeItems(turn.input))) {
        history.push({ seq: history.length + 1, message, tokens: estimate(message) })
      }
      const out = Pipeline.run(input("openai-responses", session.id, history, { model, system, tools, options }))
      const body = out.request
      expect(responsesPairingProblems(body)).toEqual([])
      sentReasoning += (body["input"] as Array<Json>).filter((i) => i["type"] === "reasoning").length
      expect(out.report.reasoning?.keepTurns ?? 2).toBe(2)
      const response = await openai.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      expect(response.status).toBe("completed")
    }
    expect(sentReasoning).toBeGreaterThan(0)
  })
})
