/**
 * Local BPE counting with js-tiktoken. The vocabularies are large (o200k is
 * 2.3 MB of JavaScript and takes about half a second to build), so each is
 * loaded on first use, synchronously (the counter's interface is
 * synchronous), and shared by every counter in the process.
 *
 * Guard against quadratic pieces: js-tiktoken merges the bytes of one
 * pre-tokenized piece in O(n²), and a piece is a whole run of letters,
 * punctuation or whitespace: 4,096 `=` or spaces take over a second. Runs
 * longer than {@link MAX_RUN} characters are therefore cut into chunks of that
 * size and each chunk is encoded alone (a cut costs at most about one token of
 * accuracy). Identical chunks are encoded once per text, and once a text has
 * spent {@link RUN_BUDGET} characters of long runs on the tokenizer, the rest
 * of its long runs are extrapolated at the tokens-per-character ratio measured
 * so far, which bounds the worst case at a few tens of milliseconds.
 */
import { Tiktoken, type TiktokenBPE } from "js-tiktoken/lite"
import { createRequire } from "node:module"

/** The encodings backed by a BPE vocabulary. */
export type BpeEncoding = "o200k_base" | "cl100k_base"

/** Longest run of one character class encoded in one piece. */
export const MAX_RUN = 64

/** Characters of long runs per text that are really encoded; the rest is extrapolated. */
export const RUN_BUDGET = 16_384

const require = createRequire(import.meta.url)

const loaders: Record<BpeEncoding, () => TiktokenBPE> = {
  o200k_base: () => require("js-tiktoken/ranks/o200k_base") as TiktokenBPE,
  cl100k_base: () => require("js-tiktoken/ranks/cl100k_base") as TiktokenBPE,
}

const instances = new Map<BpeEncoding, Tiktoken>()

/** The process-wide tokenizer for `encoding`, built on first use. */
export const tokenizer = (encoding: BpeEncoding): Tiktoken => {
  let instance = instances.get(encoding)
  if (instance === undefined) {
    instance = new Tiktoken(loaders[encoding]())
    // ctxd only counts: the decoding table (a Uint8Array, with its own
    // ArrayBuffer, per token: 600,000 heap objects for the two vocabularies,
    // marked again by every full GC) is dropped; `decode` is never called
    ;(instance as unknown as { textMap?: Map<number, Uint8Array> }).textMap?.clear()
    instances.set(encoding, instance)
  }
  return instance
}

// Special-token text ("<|endoftext|>") in user content is ordinary text:
// nothing allowed, nothing disallowed (the default would throw).
const NONE: Array<string> = []
const encodeLength = (bpe: Tiktoken, text: string): number => (text.length === 0 ? 0 : bpe.encode(text, NONE, NONE).length)

// Runs that pre-tokenize into one long piece: letters (with marks),
// punctuation/symbols, whitespace. Digits split into groups of three already.
const LONG = `{${MAX_RUN + 1},}`
const LONG_RUN = new RegExp(`[\\p{L}\\p{M}]${LONG}|[^\\s\\p{L}\\p{N}]${LONG}|\\s${LONG}`, "gu")
const HAS_LONG_RUN = new RegExp(LONG_RUN.source, "u")

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff

/** The number of BPE tokens of `text`. */
export const count = (encoding: BpeEncoding, text: string): number => {
  const bpe = tokenizer(encoding)
  if (!HAS_LONG_RUN.test(text)) return encodeLength(bpe, text)

  const memo = new Map<string, number>()
  let budget = RUN_BUDGET
  let runChars = 0
  let runTokens = 0
  const chunk = (piece: string): number => {
    const known = memo.get(piece)
    if (known !== undefined) return known
    let n: number
    if (budget > 0) {
      n = encodeLength(bpe, piece)
      budget -= piece.length
      runChars += piece.length
      runTokens += n
    } else {
      n = Math.max(1, Math.ceil((piece.length * runTokens) / runChars))
    }
    memo.set(piece, n)
    return n
  }

  let total = 0
  let position = 0
  for (const match of text.matchAll(LONG_RUN)) {
    total += encodeLength(bpe, text.slice(position, match.index))
    const run = match[0]
    let start = 0
    while (start < run.length) {
      let end = Math.min(start + MAX_RUN, run.length)
      // never split a surrogate pair
      if (end < run.length && isHighSurrogate(run.charCodeAt(end - 1))) end -= 1
      total += chunk(run.slice(start, end))
      start = end
    }
    position = match.index + run.length
  }
  return total + encodeLength(bpe, text.slice(position))
}
