/**
 * fast-check generators of random histories: parallel tool calls, errors,
 * missing and stray results, empty and unicode contents, images, pinned
 * system messages, random token counts and knobs.
 */
import type { Conversation } from "@ctxd/contracts"
import fc from "fast-check"
import * as Pipeline from "../src/Pipeline.ts"
import * as Models from "../src/Models.ts"

/** Marker text carried by every user message: `⟨u<history index>⟩`. */
export const marker = (index: number): string => `⟨u${index}⟩`

const content = fc.oneof(
  { weight: 2, arbitrary: fc.constant("") },
  { weight: 1, arbitrary: fc.constant(" \n ") },
  { weight: 4, arbitrary: fc.string({ unit: "grapheme", maxLength: 12 }) },
  { weight: 3, arbitrary: fc.string({ unit: "binary-ascii", maxLength: 12 }) },
)

const image: Conversation.ImagePart = { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBO" } }

/** True four times out of five: most calls get their result. */
const mostly = fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) })

/** Reasoning an assistant message starts with: none, Anthropic thinking (signed or redacted), a Responses reasoning item. */
type Thought = "none" | "thinking" | "redacted" | "reasoning"
const thought: fc.Arbitrary<Thought> = fc.constantFrom("none", "none", "thinking", "redacted", "reasoning")

let thoughts = 0
/** A reasoning part of kind `t` (signatures and ids unique per process, so a test can follow each). */
export const reasoningPart = (t: Exclude<Thought, "none">): Conversation.OpaquePart => {
  const k = thoughts++
  if (t === "thinking")
    return { type: "opaque", format: "anthropic", block: { type: "thinking", thinking: `thought ${k}`, signature: `sig${k}` } }
  if (t === "redacted") return { type: "opaque", format: "anthropic", block: { type: "redacted_thinking", data: `sig${k}` } }
  return {
    type: "opaque",
    format: "openai-responses",
    block: { type: "reasoning", id: `sig${k}`, summary: [], encrypted_content: `enc${k}` },
  }
}
const reasoningOf = (t: Thought): Array<Conversation.Part> => (t === "none" ? [] : [reasoningPart(t)])

type Step =
  | { readonly kind: "user"; readonly text: string; readonly image: boolean }
  | { readonly kind: "assistant"; readonly text: string; readonly thought: Thought }
  | {
      readonly kind: "calls"
      readonly thought: Thought
      readonly text: string
      readonly answers: ReadonlyArray<{ readonly answered: boolean; readonly error: boolean; readonly text: string }>
      readonly split: boolean
      readonly imageResult: boolean
      /** Reuse the first call id of the previous calls step (agents do, once it is answered). */
      readonly reuse: boolean
    }
  | { readonly kind: "system"; readonly text: string }
  | { readonly kind: "stray" }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("user" as const), text: content, image: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("assistant" as const), text: content, thought }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("calls" as const),
      thought,
      text: content,
      answers: fc.array(fc.record({ answered: mostly, error: fc.boolean(), text: content }), { minLength: 1, maxLength: 4 }),
      split: fc.boolean(),
      imageResult: fc.boolean(),
      reuse: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("system" as const), text: content }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("stray" as const) }) },
)

/**
 * Turns steps into neutral messages (ids unique per history). With
 * `thinking`, every message with tool calls starts with an Anthropic thinking
 * block (as a model with extended thinking on writes them).
 */
export const build = (steps: ReadonlyArray<Step>, greet = false, thinking = false): Array<Conversation.Message> => {
  // An optional assistant greeting first: the history then starts with an assistant message.
  const out: Array<Conversation.Message> = greet ? [{ role: "assistant", parts: [{ type: "text", text: "Hello!" }] }] : []
  let id = 0
  let previous: string | undefined
  for (const s of steps) {
    switch (s.kind) {
      case "user":
        out.push({
          role: "user",
          parts: [{ type: "text", text: marker(out.length) }, { type: "text", text: s.text }, ...(s.image ? [image] : [])],
        })
        break
      case "assistant":
        out.push({ role: "assistant", parts: [...reasoningOf(s.thought), { type: "text", text: s.text }] })
        break
      case "system":
        out.push({ role: "system", parts: [{ type: "text", text: s.text }] })
        break
      case "stray":
        out.push({ role: "tool", parts: [{ type: "tool_result", callId: `stray${id++}`, content: [], isError: false }] })
        break
      case "calls": {
        const ids = s.answers.map((_, i) => (i === 0 && s.reuse && previous !== undefined ? previous : `call${id++}`))
        previous = ids[0]
        out.push({
          role: "assistant",
          parts: [
            ...(thinking && (s.thought === "none" || s.thought === "reasoning") ? reasoningOf("thinking") : reasoningOf(s.thought)),
            // after a thought, an empty text is left out: the thought then leads straight to the call
            ...(s.thought !== "none" && s.text === "" ? [] : [{ type: "text" as const, text: s.text }]),
            ...ids.map((callId, i): Conversation.ToolCallPart => ({ type: "tool_call", id: callId, name: `t${i}`, input: { i } })),
          ],
        })
        const resultParts = s.answers.flatMap((a, i): Array<Conversation.ToolResultPart> =>
          a.answered
            ? [
                {
                  type: "tool_result",
                  callId: ids[i]!,
                  content: a.text === "" ? [] : [{ type: "text", text: a.text }, ...(s.imageResult ? [image] : [])],
                  isError: a.error,
                },
              ]
            : [],
        )
        if (resultParts.length === 0) break
        if (s.split) for (const p of resultParts) out.push({ role: "tool", parts: [p] })
        else out.push({ role: "tool", parts: resultParts })
        break
      }
    }
  }
  return out
}

export const history: fc.Arbitrary<Array<Conversation.Message>> = fc
  .tuple(fc.boolean(), fc.array(step, { maxLength: 90, size: "max" }), fc.boolean())
  .map(([greet, steps, thinking]) => build(steps, greet, thinking))

const section: fc.Arbitrary<Conversation.SystemSection> = fc.record({
  id: fc.string({ minLength: 1, maxLength: 4 }),
  text: content,
  cache: fc.constantFrom("1h" as const, "5m" as const, "none" as const),
})

const toolDef: fc.Arbitrary<Conversation.Tool> = fc.record({
  name: fc.constantFrom("alpha", "beta", "gamma", "delta", "epsilon", "Zed", "a_b"),
  inputSchema: fc.constant({ type: "object", properties: {} }),
})

/** A complete random assemble input. */
export const assembleInput: fc.Arbitrary<Pipeline.Input> = fc
  .record({
    messages: history,
    tokens: fc.array(fc.oneof({ weight: 9, arbitrary: fc.nat({ max: 400 }) }, { weight: 1, arbitrary: fc.nat({ max: 5_000 }) }), {
      minLength: 1,
      maxLength: 64,
    }),
    format: fc.constantFrom("anthropic" as const, "openai" as const),
    system: fc.array(section, { maxLength: 5 }),
    systemTokens: fc.nat({ max: 3_000 }),
    tools: fc.uniqueArray(toolDef, { selector: (t) => t.name, maxLength: 5 }),
    toolsTokens: fc.nat({ max: 3_000 }),
    windowMessages: fc.integer({ min: 1, max: 60 }),
    windowStep: fc.integer({ min: 1, max: 30 }),
    freshTailMessages: fc.integer({ min: 0, max: 24 }),
    budgetTokens: fc.option(fc.integer({ min: 1, max: 40_000 }), { nil: undefined }),
    contextWindow: fc.integer({ min: 1_024, max: 60_000 }),
    keepThinkingTurns: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  })
  .map((r) => ({
    tenant: "t",
    session: "s",
    format: r.format,
    model: Models.resolve({
      provider: r.format,
      name: r.format === "anthropic" ? "claude-x" : "gpt-4o",
      contextWindow: r.contextWindow,
    }),
    system: r.system,
    systemTokens: r.systemTokens,
    tools: r.tools,
    toolsTokens: r.toolsTokens,
    history: r.messages.map((message, i) => ({ seq: 100 + i, message, tokens: r.tokens[i % r.tokens.length]! })),
    options: Pipeline.resolveOptions({
      windowMessages: r.windowMessages,
      windowStep: r.windowStep,
      freshTailMessages: r.freshTailMessages,
      ...(r.budgetTokens === undefined ? {} : { budgetTokens: r.budgetTokens }),
      ...(r.keepThinkingTurns === undefined ? {} : { keepThinkingTurns: r.keepThinkingTurns }),
    }),
    counter: { backend: "test", encoding: "o200k_base", exact: false, calibration: 1 },
  }))
