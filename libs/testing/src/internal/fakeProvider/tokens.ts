/**
 * Token ground truth of the fake provider: the Claude BPE shipped in
 * `@anthropic-ai/tokenizer` (deliberately not the js-tiktoken encodings ctxd
 * estimates with, so estimate-vs-billed drift is real in tests).
 *
 * The package's own `countTokens` builds a new WASM tokenizer per call
 * (~100 ms); we keep one for the process and memoize encodings by text.
 */
import { getTokenizer } from "@anthropic-ai/tokenizer"

/** Tokens added once per request (the conversation frame). */
export const REQUEST_OVERHEAD = 3
/** Tokens added per message (role header and separators). */
export const MESSAGE_OVERHEAD = 4
/** Tokens added per tool definition. */
export const TOOL_OVERHEAD = 4
/** An image, whatever its size (the fake does not decode images). */
export const IMAGE_TOKENS = 1_600

type Tokenizer = ReturnType<typeof getTokenizer>

let tokenizer: Tokenizer | undefined
const memo = new Map<string, Uint32Array>()
const MEMO_LIMIT = 4_096
const MEMO_MAX_CHARS = 64 * 1024
const EMPTY = new Uint32Array(0)

/** The token ids of `text` (NFKC-normalized, as the package does). */
export const encode = (text: string): Uint32Array => {
  if (text.length === 0) return EMPTY
  const hit = memo.get(text)
  if (hit !== undefined) {
    memo.delete(text)
    memo.set(text, hit)
    return hit
  }
  tokenizer ??= getTokenizer()
  const ids = tokenizer.encode(text.normalize("NFKC"), "all")
  if (text.length > MEMO_MAX_CHARS) return ids
  if (memo.size >= MEMO_LIMIT) {
    const oldest = memo.keys().next()
    if (oldest.done !== true) memo.delete(oldest.value)
  }
  memo.set(text, ids)
  return ids
}

/** The number of tokens of `text`. */
export const count = (text: string): number => encode(text).length

/** Synthetic ids (outside the BPE vocabulary) that stand for framing tokens. */
export const frame = (kind: string, n: number): ReadonlyArray<number> => {
  let h = 0
  for (const ch of kind) h = (h * 31 + ch.charCodeAt(0)) % 1_000
  return Array.from({ length: n }, (_, i) => 0x7f00_0000 + h * 16 + i)
}
