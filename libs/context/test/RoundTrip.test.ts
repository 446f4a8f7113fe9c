/**
 * Round trips (properties) of the Anthropic Messages and OpenAI Chat
 * Completions formats: canonical input → neutral → render gives the same
 * messages (the Responses round trip is in `RenderResponses.test.ts`).
 *
 * Canonical = the documented normalizations already applied:
 * - Anthropic: content is a list of blocks (a string becomes one text
 *   block); a `tool_result` carries its content as a list of text blocks
 *   (a string becomes one text block) and `is_error` only when true; roles
 *   alternate (a new request after tool results is one user message, the
 *   results first); the renderer's
 *   `cache_control` marks are not part of the comparison (ctxd places its
 *   own breakpoints); thinking blocks, with their signatures, come back
 *   verbatim.
 * - OpenAI: the system prompt is the request's `system` field (one leading
 *   `system` message in the body); an assistant message with tool calls and
 *   no text has `content: null`; tool message content is a string.
 */
import { Anthropic, OpenAI, type Conversation } from "@ctxd/contracts"
import { Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Normalize from "../src/Normalize.ts"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import * as RenderOpenAI from "../src/providers/openai-chat/Render.ts"
import { anthropicPairingProblems, claude, gpt, openaiPairingProblems, toolsCalledIn } from "./Helpers.ts"

type Json = Record<string, unknown>

const decodeAnthropic = Schema.decodeUnknownSync(Schema.Array(Anthropic.Message))
const decodeOpenAI = Schema.decodeUnknownSync(Schema.Array(OpenAI.Message))

const word = fc.stringMatching(/^[a-z]{1,8}( [a-z]{1,8}){0,3}$/)
const names = fc.constantFrom("lookup", "book_flight", "get_user")

/** A body's messages without the renderer's cache marks. */
const withoutCacheMarks = (messages: unknown): unknown =>
  JSON.parse(JSON.stringify(messages), (key, value: unknown) => (key === "cache_control" ? undefined : value))

/** One Anthropic exchange: a user turn (text, maybe an image), then an assistant turn (thinking?, text?, calls) and its results. */
const anthropicExchange = (n: number) =>
  fc
    .record({
      user: word,
      image: fc.boolean(),
      thinking: fc.option(fc.tuple(word, fc.base64String({ minLength: 8, maxLength: 40 })), { nil: undefined }),
      redacted: fc.boolean(),
      text: fc.option(word, { nil: undefined }),
      calls: fc.array(fc.tuple(names, word, word, fc.boolean()), { maxLength: 3 }),
    })
    .map((e): Array<Json> => {
      const userContent: Array<Json> = [{ type: "text", text: e.user }]
      if (e.image) userContent.push({ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } })
      const out: Array<Json> = [{ role: "user", content: userContent }]
      const assistant: Array<Json> = []
      if (e.thinking !== undefined) assistant.push({ type: "thinking", thinking: e.thinking[0], signature: e.thinking[1] })
      if (e.redacted) assistant.push({ type: "redacted_thinking", data: `EmwKAhgB${n}` })
      if (e.text !== undefined || e.calls.length === 0) assistant.push({ type: "text", text: e.text ?? "ok" })
      e.calls.forEach(([name, q], k) => assistant.push({ type: "tool_use", id: `toolu_${n}_${k}`, name, input: { q } }))
      out.push({ role: "assistant", content: assistant })
      if (e.calls.length > 0) {
        out.push({
          role: "user",
          content: e.calls.map(([, , result, isError], k) => ({
            type: "tool_result",
            tool_use_id: `toolu_${n}_${k}`,
            content: [{ type: "text", text: result }],
            ...(isError ? { is_error: true } : {}),
          })),
        })
      }
      return out
    })

/** One Chat Completions exchange: user, assistant (text and/or calls), tool messages, maybe a pinned developer message. */
const openaiExchange = (n: number) =>
  fc
    .record({
      pinned: fc.option(fc.tuple(fc.constantFrom("system", "developer"), word), { nil: undefined }),
      user: word,
      image: fc.option(fc.constantFrom("low", "high", "auto"), { nil: undefined }),
      text: fc.option(word, { nil: undefined }),
      calls: fc.array(fc.tuple(names, word, word), { maxLength: 3 }),
    })
    .map((e): Array<Json> => {
      const out: Array<Json> = []
      if (e.pinned !== undefined) out.push({ role: e.pinned[0], content: e.pinned[1] })
      out.push(
        e.image === undefined
          ? { role: "user", content: e.user }
          : {
              role: "user",
              content: [
                { type: "text", text: e.user },
                { type: "image_url", image_url: { url: `https://example.com/${n}.png`, detail: e.image } },
              ],
            },
      )
      if (e.calls.length === 0) {
        out.push({ role: "assistant", content: e.text ?? "ok" })
        return out
      }
      out.push({
        role: "assistant",
        content: e.text ?? null,
        tool_calls: e.calls.map(([name, q], k) => ({
          id: `call_${n}_${k}`,
          type: "function",
          function: { name, arguments: JSON.stringify({ q }) },
        })),
      })
      e.calls.forEach(([, , result], k) => out.push({ role: "tool", tool_call_id: `call_${n}_${k}`, content: result }))
      return out
    })

const conversation = (exchange: (n: number) => fc.Arbitrary<Array<Json>>) =>
  fc
    .integer({ min: 1, max: 6 })
    .chain((k) => fc.tuple(...Array.from({ length: k }, (_, n) => exchange(n))))
    .map((xs) => xs.flat())

/** Consecutive messages of one role as one (Anthropic roles alternate). */
const alternating = (messages: Array<Json>): Array<Json> =>
  messages.reduce<Array<Json>>((out, m) => {
    const last = out.at(-1)
    if (last?.["role"] === m["role"])
      out[out.length - 1] = { ...last, content: [...(last!["content"] as Array<Json>), ...(m["content"] as Array<Json>)] }
    else out.push(m)
    return out
  }, [])

describe("Anthropic messages → neutral → render", () => {
  it("round-trips canonical messages exactly (thinking and redacted thinking verbatim, results first)", () => {
    fc.assert(
      fc.property(conversation(anthropicExchange).map(alternating), (messages) => {
        const neutral: ReadonlyArray<Conversation.Message> = Normalize.fromAnthropic(decodeAnthropic(messages))
        const { body } = RenderAnthropic.render({ model: claude, system: [], tools: toolsCalledIn(neutral), messages: neutral })
        expect(withoutCacheMarks(body["messages"])).toEqual(messages)
        expect(anthropicPairingProblems(body)).toEqual([])
      }),
      { numRuns: 300 },
    )
  })
})

describe("OpenAI Chat Completions messages → neutral → render", () => {
  it("round-trips canonical messages exactly after the leading system message", () => {
    fc.assert(
      fc.property(conversation(openaiExchange), (messages) => {
        const neutral = Normalize.fromOpenAI(decodeOpenAI(messages))
        const system = [{ id: "system", text: "You are a travel agent.", cache: "5m" as const }]
        const { body } = RenderOpenAI.render({ tenant: "acme", session: "s1", model: gpt, system, tools: [], messages: neutral })
        expect(body["messages"]).toEqual([{ role: "system", content: "You are a travel agent." }, ...messages])
        expect(openaiPairingProblems(body)).toEqual([])
      }),
      { numRuns: 300 },
    )
  })
})
