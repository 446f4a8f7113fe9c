/**
 * Count requests for Gemini's `models/{model}:countTokens`, one per segment,
 * rendered by `@ctxd/context`'s Gemini renderer (the body ctxd sends), so the
 * segment counts add up to the count of that body.
 *
 * Two kinds of request (see `GeminiCounter` for why):
 * - contents only (`@google/genai` `ai.models.countTokens({model, contents})`):
 *   the envelopes and the batch of new messages;
 * - a whole `generateContentRequest` (REST): the prefix, i.e. the system
 *   instruction and the tools, which the SDK does not send to the Gemini
 *   Developer API's count endpoint.
 *
 * Envelopes (measured once per model): `plain` = one `"."` user content;
 * `twoDots` = two of them (one content's cost, so the per-request framing is
 * `plain − (twoDots − plain)`); `plainRequest` = `plain` as a
 * `generateContentRequest` (subtracted from prefix counts, so both kinds of
 * request are compared with their own kind). A text is counted as a second
 * part after the `"."` of a user content, minus `plain` (exact where parts
 * are tokenized one by one; should the API join adjacent text parts first,
 * a token may merge across the boundary).
 *
 * The batch of a turn's new messages follows the `"."` user content. Contents
 * are framed one by one, so counts add up, except where the batch alone is
 * not a valid request: a function response whose call turn is in an older
 * message becomes a text part, and so does a function call turn that is not
 * right after a user turn or not right before its response turn
 * (`approximate`). The renderer merges consecutive contents of one role; a
 * batch that starts with the role the previous turn ended with is framed
 * once more than the merged whole (turns start with the assistant's reply,
 * so this is rare).
 */
import * as Models from "../../Models.ts"
import * as RenderGemini from "./Render.ts"
import type { Conversation } from "@ctxd/contracts"

type Json = Record<string, unknown>
type Content = { readonly role: string; readonly parts: ReadonlyArray<Json> }

export type Envelope = "plain" | "twoDots" | "plainRequest"

const DOT: Content = { role: "user", parts: [{ text: "." }] }

/** A contents-only count request (the SDK's `countTokens` parameters without `model`). */
export interface ContentsBody {
  readonly contents: ReadonlyArray<Content>
}

/** A REST count request of a whole `generateContentRequest`. */
export interface RequestBody {
  readonly generateContentRequest: Json
}

export type CountBody = ContentsBody | RequestBody

/** The count request of an envelope alone (`model` is filled in by the caller for `plainRequest`). */
export const envelopeBody = (envelope: Envelope): CountBody =>
  envelope === "plain"
    ? { contents: [DOT] }
    : envelope === "twoDots"
      ? { contents: [DOT, DOT] }
      : { generateContentRequest: { contents: [DOT] } }

const rendered = (
  model: string,
  system: ReadonlyArray<Conversation.SystemSection>,
  tools: ReadonlyArray<Conversation.Tool>,
  messages: ReadonlyArray<Conversation.Message>,
): Json => RenderGemini.render({ model: Models.resolve({ provider: "google", name: model }), system, tools, messages }).body

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** The prefix (system instruction and tools, with the `"."` user content) as a `generateContentRequest`; `undefined` when there is neither. */
export const prefixBody = (
  model: string,
  system: ReadonlyArray<Conversation.SystemSection>,
  tools: ReadonlyArray<Conversation.Tool>,
): RequestBody | undefined => {
  const config = rendered(model, system, tools, [])["config"]
  const c = isRecord(config) ? config : {}
  if (c["systemInstruction"] === undefined && c["tools"] === undefined) return undefined
  return {
    generateContentRequest: {
      contents: [DOT],
      ...(c["systemInstruction"] === undefined ? {} : { systemInstruction: c["systemInstruction"] }),
      ...(c["tools"] === undefined ? {} : { tools: c["tools"] }),
    },
  }
}

/** The tools alone as a `generateContentRequest` (inside `plainRequest`). */
export const toolsBody = (model: string, tools: ReadonlyArray<Conversation.Tool>): RequestBody | undefined => prefixBody(model, [], tools)

/** A text as a second part after the `"."` of a user content (minus `plain`: the text alone). */
export const textBody = (text: string): ContentsBody => ({ contents: [{ role: "user", parts: [{ text: "." }, { text }] }] })

/** A turn's new messages as a count request. */
export interface Batch {
  readonly body: ContentsBody
  /** True when the batch had to be changed to be counted alone (see the module doc). */
  readonly approximate: boolean
}

const callsOf = (c: Content | undefined): ReadonlyArray<Json> =>
  c === undefined ? [] : c.parts.flatMap((p) => (isRecord(p["functionCall"]) ? [p["functionCall"]] : []))
const responsesOf = (c: Content | undefined): ReadonlyArray<Json> =>
  c === undefined ? [] : c.parts.flatMap((p) => (isRecord(p["functionResponse"]) ? [p["functionResponse"]] : []))
const names = (items: ReadonlyArray<Json>): string =>
  items
    .map((i) => String(i["name"]))
    .sort()
    .join("\0")

const callText = (p: Json): Json => {
  const call = p["functionCall"] as Json
  return { text: `${String(call["name"])} ${JSON.stringify(call["args"] ?? {})}` }
}
const responseText = (p: Json): Json => {
  const response = p["functionResponse"] as Json
  return { text: `${String(response["name"])} ${JSON.stringify(response["response"] ?? {})}` }
}

/** The batch of a turn's new messages, rendered as the renderer renders them, made valid on its own. */
export const batch = (model: string, messages: ReadonlyArray<Conversation.Message>): Batch => {
  const contents = ((rendered(model, [], [], messages)["contents"] as Array<Content> | undefined) ?? []).map((c) => ({
    role: c.role,
    parts: [...c.parts],
  }))
  const all: Array<{ role: string; parts: Array<Json> }> = [{ role: DOT.role, parts: [...DOT.parts] }, ...contents]
  let approximate = false
  // a call turn must follow a user turn and come right before a response turn that answers it
  for (let i = 1; i < all.length; i++) {
    const c = all[i]!
    const calls = callsOf(c)
    if (calls.length === 0) continue
    const next = all[i + 1]
    const answered = next === undefined || names(responsesOf(next)) === names(calls)
    if (all[i - 1]!.role === "model" || !answered) {
      approximate = true
      c.parts = c.parts.map((p) => (isRecord(p["functionCall"]) ? callText(p) : p))
    }
  }
  // a response turn must follow the call turn it answers
  for (let i = 1; i < all.length; i++) {
    const c = all[i]!
    const responses = responsesOf(c)
    if (responses.length === 0) continue
    const calls = callsOf(all[i - 1])
    if (calls.length > 0 && names(calls) === names(responses)) continue
    approximate = true
    c.parts = c.parts.map((p) => (isRecord(p["functionResponse"]) ? responseText(p) : p))
  }
  // text parts left on a model content: their signatures stay (the API takes them on any part)
  return { body: { contents: all }, approximate }
}
