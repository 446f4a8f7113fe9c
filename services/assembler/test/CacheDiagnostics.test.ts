/**
 * `previousResponseId`: validated per format at decode (a wrong id is a
 * `BadRequest` naming the field, before anything is stored), and turned into
 * the provider's cache diagnostics request in the body where the format has
 * one (Anthropic `diagnostics.previous_message_id`; OpenAI Responses on
 * GPT-5.6+ `prompt_cache_options.comparison_response_id`).
 */
import type { Turn } from "@ctxd/contracts"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Decode from "../src/Decode.ts"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

const encoder = new TextEncoder()
const decode = (request: Record<string, unknown>) =>
  Effect.runSync(Effect.either(Decode.parseJson(encoder.encode(JSON.stringify(request))).pipe(Effect.flatMap(Decode.turnRequest))))

const base = (format: string, name: string, previousResponseId: unknown): Record<string, unknown> => {
  const provider = format === "anthropic" ? "anthropic" : "openai"
  const history =
    format === "openai-responses" ? { input: [{ role: "user", content: "hello" }] } : { messages: [{ role: "user", content: "hello" }] }
  return { turnId: "t1", format, model: { provider, name }, system: "Be brief. ".repeat(300), ...history, previousResponseId }
}

describe("previousResponseId", () => {
  it("each format takes only its API's ids: anything else is a BadRequest naming the field", () => {
    const refused: Array<[string, unknown]> = [
      ["anthropic", "resp_123"],
      ["anthropic", "chatcmpl-1"],
      ["anthropic", ""],
      ["openai-responses", "msg_123"],
      ["openai", "resp_123"],
      ["anthropic", 42],
    ]
    for (const [format, id] of refused) {
      const result = decode(base(format, format === "anthropic" ? "claude-sonnet-4-5" : "gpt-5.6", id))
      if (Either.isRight(result)) throw new Error(`expected ${JSON.stringify(id)} refused on ${format}`)
      expect(result.left).toMatchObject({ _tag: "BadRequest", path: "previousResponseId" })
    }
    for (const [format, id] of [
      ["anthropic", "msg_01XyZ"],
      ["anthropic", null],
      ["openai-responses", "resp_0cd5d6b8"],
      ["openai", "chatcmpl-abc123"],
    ] as const) {
      expect(Either.isRight(decode(base(format, format === "anthropic" ? "claude-sonnet-4-5" : "gpt-5.6", id)))).toBe(true)
    }
  })

  const turn = async (request: Record<string, unknown>) => {
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    return turns.turn("acme", "s1", request as unknown as Turn.TurnRequest)
  }

  it("asks for the provider's diagnostics in the body where the format has them", async () => {
    const anthropic = await turn(base("anthropic", "claude-sonnet-4-5", "msg_01XyZ"))
    expect(anthropic.request["diagnostics"]).toEqual({ previous_message_id: "msg_01XyZ" })
    const optIn = await turn(base("anthropic", "claude-sonnet-4-5", null))
    expect(optIn.request["diagnostics"]).toEqual({ previous_message_id: null })
    const without = await turn(base("anthropic", "claude-sonnet-4-5", undefined))
    expect(without.request).not.toHaveProperty("diagnostics")

    const responses = await turn(base("openai-responses", "gpt-5.6", "resp_0cd5"))
    expect(responses.request["prompt_cache_options"]).toEqual({ mode: "explicit", ttl: "30m", comparison_response_id: "resp_0cd5" })
    // models before GPT-5.6 take no prompt_cache_options: nothing to ask there
    const older = await turn(base("openai-responses", "gpt-4.1", "resp_0cd5"))
    expect(older.request).not.toHaveProperty("prompt_cache_options")
    // promptCache: false drops the cache markers, not the diagnostics comparison
    const unmarked = await turn({ ...base("openai-responses", "gpt-5.6", "resp_0cd5"), options: { promptCache: false } })
    expect(unmarked.request["prompt_cache_options"]).toEqual({ comparison_response_id: "resp_0cd5" })
    expect(JSON.stringify(unmarked.request)).not.toContain("prompt_cache_breakpoint")
    // Chat Completions has no diagnostics field
    const chat = await turn(base("openai", "gpt-5.6", "chatcmpl-abc"))
    expect(chat.request["prompt_cache_options"]).toEqual({ mode: "explicit", ttl: "30m" })
  })
})

describe("report.cache.miss", () => {
  it("nothing on an append; the client's change of its own system prompt; a TTL expiry; each with the previous prompt's lost tokens", async () => {
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const t0 = Date.UTC(2026, 11, 1)
    const system = "You are a support agent. ".repeat(400)
    let n = 0
    const next = (text: string, over: Record<string, unknown> = {}) => {
      n++
      const request = {
        turnId: `t${n}`,
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-sonnet-4-5" },
        system,
        messages:
          n === 1
            ? [{ role: "user", content: text }]
            : [
                { role: "assistant", content: "ok" },
                { role: "user", content: text },
              ],
        ...over,
      }
      return request
    }
    const first = await turns.turn("acme", "miss", next("hello") as unknown as Turn.TurnRequest, undefined, t0)
    expect(first.report.cache.miss).toBeUndefined()
    const appended = await turns.turn("acme", "miss", next("more") as unknown as Turn.TurnRequest, undefined, t0 + 10_000)
    expect(appended.report.cache.reason).toBe("append")
    expect(appended.report.cache.miss).toBeUndefined()
    const changed = await turns.turn(
      "acme",
      "miss",
      next("again", { system: "You are a sales agent. ".repeat(400) }) as unknown as Turn.TurnRequest,
      undefined,
      t0 + 20_000,
    )
    expect(changed.report.cache.miss).toMatchObject({ cause: "client_change", reason: "system" })
    expect(changed.report.cache.miss!.tokens).toBeGreaterThan(2_000)
    const late = await turns.turn(
      "acme",
      "miss",
      next("after lunch", { system: "You are a sales agent. ".repeat(400) }) as unknown as Turn.TurnRequest,
      undefined,
      t0 + 3 * 3_600_000,
    )
    expect(late.report.cache).toMatchObject({ reason: "ttl_expired", miss: { cause: "ttl_expiry" } })
    expect(late.report.cache.miss!.tokens).toBe(changed.report.cache.prefixTokens)
    await turns.dispose()
  })
})
