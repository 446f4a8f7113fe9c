/**
 * The prefix check of preserved thinking, as the fake provider runs it: pure
 * functions over request bodies, so property tests can sign and check
 * without HTTP.
 *
 * On a model whose row binds reasoning (`bindsReasoningToPrefix`) every
 * thinking / redacted_thinking block the fake produces carries a signature
 * naming the producing model and a digest of the block's prefix: the
 * request's top-level `system`, `tools`, every earlier message and the
 * earlier blocks of the same assistant content ("The top-level system
 * prompt, tools, and messages before the block are its prefix. If the prefix
 * differs from what you sent when the block was produced, that block and
 * every later thinking block are invalid",
 * https://platform.claude.com/docs/en/build-with-claude/preserved-thinking).
 * The digest is over the content as the API compares it: `cache_control`
 * markers are left out (they move every turn in any cached conversation, and
 * the gateways' guides say the check ignores them), deferred tools
 * (`defer_loading: true`) are left out (exempt from the check), a string
 * `content` or `system` counts as its one text block. Earlier thinking blocks
 * are part of a later block's prefix, so a block between others omitted or
 * moved fails it, as the prefix-checks page says
 * (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks);
 * the fake is strict where the docs leave room: leaving out the oldest
 * blocks also changes the prefix of the later ones.
 *
 * On a later request each block with a signature the fake made is checked:
 * a block whose producer the model cannot read is dropped without an error
 * (the model check); the first block whose prefix differs fails, with every
 * later thinking block: a 400 `invalid_request_error`, or, under
 * `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` (beta
 * header `thinking-binding-controls-2026-08-01`), removed and listed in the
 * response's `input_transformations` (SDK `BetaInputTransformation`).
 * Signatures the fake did not make are not checked (older fixtures), and
 * models that do not bind are not checked at all.
 */
import { createHash } from "node:crypto"
import { AnthropicProvider, CostModel } from "@ctxd/context"
import { isRecord, type Json, stableJson, stripCacheControl } from "./json.ts"

const { Binding } = AnthropicProvider

const PREFIX = "ctxdfake-bound."
const FIX_PAGE = "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/fix-bound-to-a-different-conversation"

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])
const isThinking = (b: unknown): b is Json => isRecord(b) && (b["type"] === "thinking" || b["type"] === "redacted_thinking")

/** True when the model runs the prefix check (its row's `bindsReasoningToPrefix`). */
export const binds = (model: string): boolean => CostModel.lookup(model).capabilities.bindsReasoningToPrefix

const blocksOf = (content: unknown): ReadonlyArray<unknown> =>
  typeof content === "string" ? [{ type: "text", text: content }] : list(content)

/** The prefix as compared: canonical, without cache markers and deferred tools. */
const canonicalFixed = (body: Json): unknown => [
  blocksOf(body["system"]).map(stripCacheControl),
  list(body["tools"])
    .filter((t) => !(isRecord(t) && t["defer_loading"] === true))
    .map(stripCacheControl),
]

/** Digest of the prefix of block `k` of message `m` (`k` = content length: the whole message). */
const digestAt = (fixed: string, messages: ReadonlyArray<unknown>, m: number, k: number, content?: ReadonlyArray<unknown>): string => {
  const hash = createHash("sha256").update(fixed)
  for (let i = 0; i < m; i++) {
    const message = messages[i]
    if (!isRecord(message)) continue
    hash.update(stableJson([message["role"], blocksOf(message["content"]).map(stripCacheControl)]))
  }
  const own = content ?? blocksOf(isRecord(messages[m]) ? messages[m]["content"] : [])
  hash.update(stableJson(["assistant", own.slice(0, k).map(stripCacheControl)]))
  return hash.digest("base64url")
}

interface Bound {
  readonly model: string
  readonly digest: string
}

const decode = (signature: unknown): Bound | undefined => {
  if (typeof signature !== "string" || !signature.startsWith(PREFIX)) return undefined
  try {
    const parsed: unknown = JSON.parse(Buffer.from(signature.slice(PREFIX.length), "base64url").toString("utf8"))
    if (isRecord(parsed) && typeof parsed["model"] === "string" && typeof parsed["digest"] === "string")
      return { model: parsed["model"], digest: parsed["digest"] }
  } catch {
    // not one of the fake's
  }
  return undefined
}

const signatureOf = (block: Json): unknown => (block["type"] === "thinking" ? block["signature"] : block["data"])

/**
 * `content` (the assistant content a response to `body` carries) with every
 * thinking block signed for `model`: its signature (a `redacted_thinking`
 * block: its `data`) names the model and the digest of its prefix. Unchanged
 * on a model that does not bind.
 */
export const sign = (body: Json, model: string, content: ReadonlyArray<Json>): Array<Json> => {
  if (!binds(model)) return [...content]
  const messages = list(body["messages"])
  const fixed = stableJson(canonicalFixed(body))
  // in order: a block's prefix holds the earlier blocks as signed
  const signed: Array<Json> = []
  for (const block of content) {
    if (!isThinking(block)) {
      signed.push(block)
      continue
    }
    const digest = digestAt(fixed, messages, messages.length, signed.length, signed)
    const signature = PREFIX + Buffer.from(JSON.stringify({ model, digest })).toString("base64url")
    signed.push(block["type"] === "thinking" ? { ...block, signature } : { ...block, data: signature })
  }
  return signed
}

/** One entry of `input_transformations` (SDK `BetaThinkingDroppedInputTransformation`). */
export interface Dropped {
  readonly type: "thinking_dropped"
  readonly path: string
  readonly reason: "model_binding_mismatch" | "prefix_binding_mismatch"
}

/** The outcome of {@link check}: the body the model sees and what was dropped, or the API's 400 message. */
export type Outcome =
  { readonly ok: true; readonly body: Json; readonly dropped: ReadonlyArray<Dropped> } | { readonly ok: false; readonly message: string }

const behaviorOf = (body: Json): unknown => {
  const thinking = body["thinking"]
  const binding = isRecord(thinking) ? thinking["block_binding"] : undefined
  return isRecord(binding) ? binding["prefix_mismatch_behavior"] : undefined
}

/**
 * The prefix check of `body` (the `anthropic-beta` values `betas`): the
 * blocks that fail it and what the API does about them.
 */
export const check = (body: Json, betas: ReadonlyArray<string>): Outcome => {
  const behavior = behaviorOf(body)
  if (behavior !== undefined && behavior !== null && !betas.includes(Binding.BETA))
    return { ok: false, message: `thinking.block_binding: requires the beta header \`anthropic-beta: ${Binding.BETA}\`` }
  const model = String(body["model"])
  if (!binds(model)) return { ok: true, body, dropped: [] }
  const messages = list(body["messages"])
  const fixed = stableJson(canonicalFixed(body))
  const dropped: Array<Dropped> = []
  let failed = false
  messages.forEach((message, m) => {
    if (!isRecord(message) || message["role"] !== "assistant") return
    blocksOf(message["content"]).forEach((block, k) => {
      if (!isThinking(block)) return
      const bound = decode(signatureOf(block))
      if (bound === undefined) return
      const path = `messages.${m}.content.${k}`
      if (!Binding.reads(model, bound.model)) {
        dropped.push({ type: "thinking_dropped", path, reason: "model_binding_mismatch" })
        return
      }
      if (!failed && bound.digest !== digestAt(fixed, messages, m, k)) failed = true
      if (failed) dropped.push({ type: "thinking_dropped", path, reason: "prefix_binding_mismatch" })
    })
  })
  const first = dropped.find((d) => d.reason === "prefix_binding_mismatch")
  if (first !== undefined && behavior !== "drop_block")
    return {
      ok: false,
      message: `${first.path}: Invalid \`signature\` in \`thinking\` block. The block is bound to a different conversation. See ${FIX_PAGE}`,
    }
  if (dropped.length === 0) return { ok: true, body, dropped }
  const gone = new Set(dropped.map((d) => d.path))
  const kept = messages.map((message, m) =>
    !isRecord(message) || !Array.isArray(message["content"])
      ? message
      : { ...message, content: message["content"].filter((_b: unknown, k: number) => !gone.has(`messages.${m}.content.${k}`)) },
  )
  return { ok: true, body: { ...body, messages: kept }, dropped }
}
