/**
 * Real sessions in every request format through the official SDKs: tau-bench
 * and SWE-agent sessions replayed turn by turn in each format
 * (`Workloads.inFormat`), each turn decoded as a turn request, normalized,
 * assembled by the pipeline (window, masking, tool compression, a budget cut
 * under the tight profile), and the body sent with the provider's own SDK to
 * the fake provider, which validates like the API (roles, pairing, keys).
 * Every body must be accepted, and pass the independent pairing checks.
 */
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import { Turn } from "@ctxd/contracts"
import { FakeProvider, Workloads } from "@ctxd/testing"
import { Schema } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import {
  anthropicPairingProblems,
  anthropicShapeProblems,
  geminiPairingProblems,
  openaiPairingProblems,
  responsesPairingProblems,
} from "./Helpers.ts"

type Json = Record<string, unknown>

const decodeRequest = Schema.decodeUnknownSync(Turn.TurnRequest)
const estimate = (value: unknown): number => Math.ceil(JSON.stringify(value).length / 4)

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI
let gemini: GoogleGenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
  gemini = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: server.url, retryOptions: { attempts: 1 } } })
})
afterAll(() => server.close())

/** Sends `body` with the SDK of `format`; resolves with the billed input tokens. */
const send = async (format: Turn.Format, body: Json): Promise<number> => {
  switch (format) {
    case "anthropic": {
      // a timeout of its own: without one the SDK refuses a non-streaming call whose max_tokens
      // (Claude 5.x: 128,000) may take more than 10 minutes
      const r = await anthropic.messages.create(body as unknown as Anthropic.MessageCreateParamsNonStreaming, { timeout: 60_000 })
      return r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0) + (r.usage.cache_creation_input_tokens ?? 0)
    }
    case "openai": {
      const r = await openai.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)
      return r.usage?.prompt_tokens ?? 0
    }
    case "openai-responses": {
      const r = await openai.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      return r.usage?.input_tokens ?? 0
    }
    case "gemini": {
      const r = await gemini.models.generateContent(body as unknown as Parameters<GoogleGenAI["models"]["generateContent"]>[0])
      return r.usageMetadata?.promptTokenCount ?? 0
    }
  }
}

/** Pairing and shape problems of a body, by the checkers that do not share code with the renderers. */
const problems = (format: Turn.Format, body: Json, breakpoints: number): Array<string> => {
  switch (format) {
    case "anthropic":
      return [...anthropicPairingProblems(body), ...anthropicShapeProblems(body, breakpoints)]
    case "openai":
      return openaiPairingProblems(body)
    case "openai-responses":
      return responsesPairingProblems(body)
    case "gemini":
      return geminiPairingProblems(body)
  }
}

/** The worker's default knobs, and a tight profile that windows, masks and cuts by budget. */
const profiles: ReadonlyArray<readonly [string, Turn.Options]> = [
  ["defaults", {}],
  ["tight", { windowMessages: 10, windowStep: 4, maskKeep: 2, budgetTokens: 6_000, toolCompression: "aggressive" }],
]

const replay = async (session: Workloads.ReplaySession, format: Turn.Format, options: Turn.Options, maxTurns: number) => {
  const formatted = Workloads.inFormat(session, format)
  const model = Models.resolve(formatted.model)
  const history: Array<Pipeline.StoredMessage> = []
  const known = new Set<string>()
  const answered = new Set<string>()
  let sent = 0
  for (const [k, fields] of formatted.turns.slice(0, maxTurns).entries()) {
    // a Gemini function response without id may answer a call of an earlier turn
    const open = () =>
      Normalize.openCalls(
        history.map((h) => h.message),
        known,
        answered,
      )
    const request = Normalize.request(decodeRequest({ turnId: `t${k}`, model: formatted.model, system: formatted.system, ...fields }), open)
    expect(Normalize.findPairingError(known, answered, request.messages)).toBeUndefined()
    for (const { message } of request.messages) {
      history.push({ seq: history.length + 1, message, tokens: estimate(message) })
      Normalize.recordPairing(known, answered, message)
    }
    const out = Pipeline.run({
      tenant: "formats",
      session: `${session.id}-${format}`,
      format,
      model,
      system: request.system,
      systemTokens: estimate(request.system),
      tools: request.tools,
      toolsTokens: estimate(request.tools),
      history,
      options: Pipeline.resolveOptions(options),
      counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
    })
    expect(problems(format, out.request, out.report.cache.breakpoints)).toEqual([])
    expect(await send(format, out.request)).toBeGreaterThan(0)
    sent++
  }
  return sent
}

describe.each(Workloads.formats)("%s bodies of real sessions through the official SDK", (format) => {
  it.each(profiles)("the four longest tau-bench sessions, %s options: every turn's body is accepted", async (_, options) => {
    let turns = 0
    for (const session of Workloads.tauBenchSessions().slice(4)) turns += await replay(session, format, options, 40)
    expect(turns).toBeGreaterThan(70)
  })

  it("the SWE-agent trajectories back to back as one long session, tight profile: every turn's body is accepted", async () => {
    const sessions = Workloads.sweAgentSessions()
    // one agent with every trajectory's tools
    const tools = [...new Map(sessions.flatMap((s) => s.tools).map((t) => [t.function.name, t])).values()]
    const long = { ...sessions[0]!, id: "swe-all", tools, turns: sessions.flatMap((s) => s.turns) }
    expect(await replay(long, format, profiles[1]![1], Infinity)).toBe(long.turns.length)
    expect(long.turns.length).toBeGreaterThan(30)
  })
})
