/**
 * Anthropic on-demand compaction (beta `compact-2026-09-04`), as the fake
 * provider plays it:
 * https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand
 * and https://platform.claude.com/docs/en/build-with-claude/compaction-background.
 *
 * - A request with `compaction: {type: "summarize"}` gets no reply but one
 *   signed `compaction` block (`stop_reason: "compaction"`): `content` the
 *   readable summary (a scripted reply's text, else a deterministic line),
 *   `encrypted_content` the opaque record of what was summarized (a digest
 *   of `system`, `tools` and `messages` and the content's hash), `signature`
 *   an HMAC over that record. Usage lists the operation as a `compaction`
 *   entry of `usage.iterations` (the SDK's `BetaCompactionIterationUsage`);
 *   the top-level fields carry the same numbers, there being no sampling.
 * - Refusals, with the SDK's `error.details.error_code` (the classes the SDK
 *   declares on `messages.create`): a request ending on an assistant turn
 *   with an unanswered `tool_use` (`compaction_incomplete_turn`), one with
 *   nothing but a compaction block (`compaction_nothing_to_summarize`);
 *   under the beta, a compaction block whose `signature` does not verify
 *   (`compaction_signature_invalid`), whose `content` was edited
 *   (`compaction_content_mismatch`), that is not the first block of
 *   `messages` (`compaction_block_misplaced`), or two with content
 *   (`compaction_block_ambiguous`). The messages are not documented: they
 *   are the SDK's descriptions of those classes.
 *
 * Blocks sent with the older `compact-2026-01-12` beta alone are not checked
 * (clients make those; the threshold flow has the API drop what precedes).
 */
import { createHash, createHmac } from "node:crypto"
import { isRecord, type Json, stableJson, stripCacheControl } from "./json.ts"

/** The beta header value of on-demand compaction. */
export const BETA = "compact-2026-09-04"

const SECRET = "ctxd-fake-provider-compaction"
const SIGNATURE_PREFIX = "fakecmp1."

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])
const sha = (text: string): string => createHash("sha256").update(text).digest("hex")
const sign = (record: string): string => SIGNATURE_PREFIX + createHmac("sha256", SECRET).update(record).digest("base64url")

/** A refusal: HTTP status, the API's error type, the SDK's error code and a message. */
export interface Refusal {
  readonly status: number
  readonly code: string
  readonly message: string
}

const refuse = (code: string, message: string, status = 400): Refusal => ({ status, code, message })

/** What the block's `encrypted_content` records. */
interface Record {
  readonly v: 1
  /** Digest of what was summarized: `system`, `tools`, `messages` (without cache breakpoints). */
  readonly prefix: string
  readonly contentSha: string
}

/**
 * The digest a compaction block stands for: what it summarized (the
 * request's `system`, `tools` and `messages` as sent). A prefix check that
 * meets the block first in `messages` reads the summarized prefix as this
 * digest, which is why kept turns' thinking stays valid after an
 * API-written summary (and not after ctxd's own).
 */
export const summarizedPrefix = (block: unknown): string | undefined => {
  if (!isRecord(block) || typeof block["encrypted_content"] !== "string") return undefined
  try {
    const record = JSON.parse(Buffer.from(block["encrypted_content"], "base64url").toString("utf8")) as Record
    return typeof record.prefix === "string" ? record.prefix : undefined
  } catch {
    return undefined
  }
}

const blocksOf = (message: unknown): ReadonlyArray<unknown> => (isRecord(message) ? list(message["content"]) : [])
const isCompaction = (block: unknown): block is Json => isRecord(block) && block["type"] === "compaction"

/** The checks of the compaction blocks a request sends under the beta (see the module comment). */
const checkBlocks = (messages: ReadonlyArray<unknown>): Refusal | undefined => {
  const found: Array<{ readonly m: number; readonly k: number; readonly block: Json }> = []
  messages.forEach((message, m) =>
    blocksOf(message).forEach((block, k) => {
      if (isCompaction(block) && block["content"] !== null && block["content"] !== undefined) found.push({ m, k, block })
    }),
  )
  if (found.length > 1) {
    return refuse(
      "compaction_block_ambiguous",
      "messages holds more than one `compaction` block with content. Send only the block the conversation returned last.",
    )
  }
  const only = found[0]
  if (only === undefined) return undefined
  const encrypted = only.block["encrypted_content"]
  const signature = only.block["signature"]
  if (typeof encrypted !== "string" || typeof signature !== "string" || signature !== sign(encrypted)) {
    return refuse(
      "compaction_signature_invalid",
      `messages.${only.m}.content.${only.k}: The \`compaction\` block's \`signature\` does not verify.`,
    )
  }
  let record: Record | undefined
  try {
    record = JSON.parse(Buffer.from(encrypted, "base64url").toString("utf8")) as Record
  } catch {
    record = undefined
  }
  if (record === undefined || record.contentSha !== sha(String(only.block["content"]))) {
    return refuse(
      "compaction_content_mismatch",
      `messages.${only.m}.content.${only.k}: The \`compaction\` block's \`content\` differs from the text its \`signature\` recorded.`,
    )
  }
  if (only.m !== 0 || only.k !== 0) {
    return refuse(
      "compaction_block_misplaced",
      `messages.${only.m}.content.${only.k}: The \`compaction\` block is not the first block of the conversation.`,
    )
  }
  return undefined
}

const unansweredToolUse = (messages: ReadonlyArray<unknown>): boolean => {
  const last = messages[messages.length - 1]
  return isRecord(last) && last["role"] === "assistant" && blocksOf(last).some((b) => isRecord(b) && b["type"] === "tool_use")
}

/** True when `body` asks for an on-demand summary. */
export const asksForSummary = (body: Json): boolean => isRecord(body["compaction"]) && body["compaction"]["type"] === "summarize"

/**
 * The refusal of `body` under `betas`, checked before the general
 * validation so the compaction-specific code is the one answered; or
 * `undefined`. Without the beta nothing here applies.
 */
export const check = (body: unknown, betas: ReadonlyArray<string>): Refusal | undefined => {
  if (!isRecord(body) || !betas.includes(BETA)) return undefined
  const messages = list(body["messages"])
  if (asksForSummary(body)) {
    if (unansweredToolUse(messages)) {
      return refuse("compaction_incomplete_turn", "The compaction request ends on an `assistant` turn that is not finished.")
    }
    const content = messages.flatMap((m) => {
      const c = isRecord(m) ? m["content"] : undefined
      return typeof c === "string" ? (c.length > 0 ? [c] : []) : blocksOf(m).filter((b) => !isCompaction(b))
    })
    if (content.length === 0) {
      return refuse("compaction_nothing_to_summarize", "`messages` holds no `user` or `assistant` content to summarize or adopt.")
    }
  }
  return checkBlocks(messages)
}

/** The signed block summarizing `body` with `summary` as its readable content. */
export const block = (body: Json, summary: string): Json => {
  const prefix = sha(
    stableJson({
      system: stripCacheControl(body["system"] ?? null),
      tools: stripCacheControl(body["tools"] ?? []),
      messages: stripCacheControl(body["messages"] ?? []),
    }),
  )
  const record: Record = { v: 1, prefix, contentSha: sha(summary) }
  const encrypted = Buffer.from(JSON.stringify(record), "utf8").toString("base64url")
  return { type: "compaction", content: summary, encrypted_content: encrypted, signature: sign(encrypted) }
}

/** The `usage` of a compaction response: the operation as the one `compaction` iteration, and the same at the top. */
export const usage = (
  split: { readonly input: number; readonly read: number; readonly creation5m: number; readonly creation1h: number },
  outputTokens: number,
): Json => {
  const cache = { ephemeral_5m_input_tokens: split.creation5m, ephemeral_1h_input_tokens: split.creation1h }
  const counts = {
    input_tokens: split.input,
    output_tokens: outputTokens,
    cache_creation_input_tokens: split.creation5m + split.creation1h,
    cache_read_input_tokens: split.read,
    cache_creation: cache,
  }
  return {
    ...counts,
    server_tool_use: null,
    service_tier: "standard",
    inference_geo: null,
    iterations: [{ type: "compaction", ...counts }],
  }
}
