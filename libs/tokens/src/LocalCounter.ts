/**
 * The local counter port: synchronous counting without I/O for the assembly
 * hot path. Two backends: `tiktoken` (js-tiktoken BPE, `o200k_base` or
 * `cl100k_base`) and `heuristic` (four characters per token). Neither is
 * exact for every provider (`exact` is false): exact counts come from the
 * provider's own counting endpoint, elsewhere, behind a breaker that falls
 * back to this (the token counter, `@ctxd/token-counter`).
 *
 * Counting is segment-wise: every text part, tool call, tool result text,
 * opaque block and tool definition is one segment, cached by the SHA-1 of
 * `encoding + "\0" + text` in an LRU, so a turn only tokenizes what is new and
 * a stable tool list is counted once. Message, system section and tool objects
 * are treated as immutable values: one counted once is remembered by identity
 * (a `WeakMap`), so recounting a history already in memory, or the system and
 * tools the worker keeps decoded across turns (`Prefixes`), costs a lookup
 * per object rather than hashing its text.
 *
 * The framing a provider adds around content is estimated with the constants
 * in {@link overhead}; images are a fixed estimate.
 */
import * as ConfigReference from "@ctxd/config/ConfigReference"
import type { Conversation } from "@ctxd/contracts"
import { Config, type ConfigError, Context, Effect, Layer } from "effect"
import { hash } from "node:crypto"
import { type Encoding, encodingFor as encodingForModel } from "./Encoding.ts"
import * as Bpe from "./internal/bpe.ts"
import * as Lru from "./Lru.ts"

export type { Encoding } from "./Encoding.ts"

/** Which local implementation counts. */
export type Backend = "tiktoken" | "heuristic"

/** Cache counters: `hits` and `misses` of segment (and message) lookups, `size` = segments cached. */
export interface Stats {
  readonly hits: number
  readonly misses: number
  readonly size: number
}

/** The counter. Every method is synchronous and never fails. */
export interface LocalCounterService {
  readonly backend: Backend
  /** Whether counts are exact for the provider; false for both local backends. */
  readonly exact: boolean
  /** The encoding for a model; the heuristic backend always answers `"heuristic"`. */
  readonly encodingFor: (model: { readonly provider: string; readonly name: string }) => Encoding
  /** Tokens of a plain text (no framing). Cached by content hash. */
  readonly countText: (text: string, encoding: Encoding) => number
  /** Tokens of a message: its parts plus the per-message framing in {@link overhead}. */
  readonly countMessage: (message: Conversation.Message, encoding: Encoding) => number
  /** Tokens of the system prompt made of these sections (0 for none). */
  readonly countSystem: (sections: ReadonlyArray<Conversation.SystemSection>, encoding: Encoding) => number
  /** Tokens of the tool definitions (0 for none); each tool is its own cached segment. */
  readonly countTools: (tools: ReadonlyArray<Conversation.Tool>, encoding: Encoding) => number
  readonly stats: () => Stats
}

/** The local counter of this process. */
export class LocalCounter extends Context.Tag("@ctxd/tokens/LocalCounter")<LocalCounter, LocalCounterService>() {}

/**
 * Framing estimates, in tokens, added on top of content (the same for every
 * encoding; calibrated against billed usage elsewhere):
 * - `message` 4 per message (role and delimiters, as in OpenAI's cookbook);
 *   a message `name` adds `name` 1 plus its text.
 * - `toolCall` 4 per tool call, plus its name and its arguments JSON (the raw
 *   OpenAI `arguments` string when present, else `JSON.stringify(input)`).
 * - `toolResult` 4 per tool result, plus its content.
 * - `image` 1,000 per image (about a 1-megapixel image on Claude, a 1024²
 *   high-detail tile set on OpenAI); `imageLow` 85 for OpenAI `detail: "low"`.
 * - `system` 4 for a non-empty system prompt, plus `systemSection` 1 per
 *   section after the first (the separator).
 * - `tool` 8 per tool definition, plus the JSON of `{name, description,
 *   input_schema}`; `tools` 12 once when there is at least one tool. Not
 *   included: the tool-use system prompt Anthropic adds (a few hundred tokens);
 *   callers reserve that per provider.
 * - opaque blocks (thinking, documents...) count as their JSON.
 */
export const overhead = {
  message: 4,
  name: 1,
  toolCall: 4,
  toolResult: 4,
  image: 1_000,
  imageLow: 85,
  system: 4,
  systemSection: 1,
  tool: 8,
  tools: 12,
} as const

/** How to build a counter. */
export interface Options {
  readonly backend: Backend
  /** Segments kept in the LRU count cache; default 1,024. Each entry is a 28-character key and a number. */
  readonly cacheCapacity?: number
  /** Vocabularies to load now instead of on first use (each takes ~0.3–0.6 s); default none. */
  readonly preload?: ReadonlyArray<Encoding>
}

/** The character heuristic: `ceil(length / 4)` in UTF-16 code units. */
export const heuristicCount = (text: string): number => Math.ceil(text.length / 4)

const json = (value: unknown): string => JSON.stringify(value) ?? ""

/** Builds a counter. Pure and synchronous, except for `preload`. */
export const make = (options: Options): LocalCounterService => {
  const backend = options.backend
  const cache = Lru.make<number>(options.cacheCapacity ?? 1_024)
  const known = new WeakMap<Conversation.Message, Partial<Record<Encoding, number>>>()
  let hits = 0
  let misses = 0

  if (backend === "tiktoken") {
    for (const encoding of options.preload ?? []) {
      if (encoding !== "heuristic") Bpe.tokenizer(encoding)
    }
  }

  const tokenize = (text: string, encoding: Bpe.BpeEncoding): number => {
    try {
      return Bpe.count(encoding, text)
    } catch {
      // The interface cannot fail; a tokenizer bug must not fail a turn.
      return heuristicCount(text)
    }
  }

  const countText = (text: string, encoding: Encoding): number => {
    if (backend === "heuristic" || encoding === "heuristic") return heuristicCount(text)
    if (text.length === 0) return 0
    const key = hash("sha1", `${encoding}\0${text}`, "base64")
    const cached = cache.get(key)
    if (cached !== undefined) {
      hits++
      return cached
    }
    misses++
    const n = tokenize(text, encoding)
    cache.set(key, n)
    return n
  }

  const countImage = (part: Conversation.ImagePart): number => (part.detail === "low" ? overhead.imageLow : overhead.image)

  const countPart = (part: Conversation.Part, encoding: Encoding): number => {
    switch (part.type) {
      case "text":
        return countText(part.text, encoding)
      case "image":
        return countImage(part)
      case "opaque":
        return countText(json(part.block), encoding)
      case "tool_call":
        return overhead.toolCall + countText(part.name, encoding) + countText(part.arguments ?? json(part.input ?? {}), encoding)
      case "tool_result": {
        let n = overhead.toolResult
        for (const content of part.content) {
          n += content.type === "text" ? countText(content.text, encoding) : countImage(content)
        }
        return n
      }
    }
  }

  const countMessage = (message: Conversation.Message, encoding: Encoding): number => {
    const memo = known.get(message)
    const remembered = memo?.[encoding]
    if (remembered !== undefined) {
      hits++
      return remembered
    }
    let n = overhead.message
    if (message.name !== undefined) n += overhead.name + countText(message.name, encoding)
    for (const part of message.parts) n += countPart(part, encoding)
    if (memo === undefined) known.set(message, { [encoding]: n })
    else memo[encoding] = n
    return n
  }

  /** A value's count in `encoding`, remembered by the value's identity (sections and tools are immutable values too). */
  const remembered = <K extends object>(
    memo: WeakMap<K, Partial<Record<Encoding, number>>>,
    key: K,
    encoding: Encoding,
    count: () => number,
  ): number => {
    const known = memo.get(key)
    const n = known?.[encoding]
    if (n !== undefined) {
      hits++
      return n
    }
    const counted = count()
    if (known === undefined) memo.set(key, { [encoding]: counted })
    else known[encoding] = counted
    return counted
  }
  const sections = new WeakMap<Conversation.SystemSection, Partial<Record<Encoding, number>>>()
  const definitions = new WeakMap<Conversation.Tool, Partial<Record<Encoding, number>>>()

  const countSystem = (list: ReadonlyArray<Conversation.SystemSection>, encoding: Encoding): number => {
    if (list.length === 0) return 0
    let n = overhead.system + overhead.systemSection * (list.length - 1)
    for (const section of list) n += remembered(sections, section, encoding, () => countText(section.text, encoding))
    return n
  }

  const countTool = (tool: Conversation.Tool, encoding: Encoding): number =>
    countText(json({ name: tool.name, description: tool.description, input_schema: tool.inputSchema }), encoding)

  const countTools = (tools: ReadonlyArray<Conversation.Tool>, encoding: Encoding): number => {
    if (tools.length === 0) return 0
    let n = overhead.tools
    for (const tool of tools) n += overhead.tool + remembered(definitions, tool, encoding, () => countTool(tool, encoding))
    return n
  }

  return {
    backend,
    exact: false,
    encodingFor: backend === "heuristic" ? () => "heuristic" : encodingForModel,
    countText,
    countMessage,
    countSystem,
    countTools,
    stats: () => ({ hits, misses, size: cache.size() }),
  }
}

/** The js-tiktoken counter; vocabularies load on first use unless `preload`ed. */
export const layerTiktoken = (options: Omit<Options, "backend"> = {}): Layer.Layer<LocalCounter> =>
  Layer.sync(LocalCounter, () => make({ ...options, backend: "tiktoken" }))

/** The four-characters-per-token counter (no vocabulary, no cache). */
export const layerHeuristic: Layer.Layer<LocalCounter> = Layer.sync(LocalCounter, () => make({ backend: "heuristic" }))

/**
 * Options from the environment: `CTXD_TOKENIZER` (`tiktoken` or `heuristic`,
 * default `tiktoken`) and `CTXD_TOKEN_CACHE_SIZE` (segments, default 1,024).
 */
export const config: Config.Config<{ readonly backend: Backend; readonly cacheCapacity: number }> = Config.all({
  backend: Config.literal(
    "tiktoken",
    "heuristic",
  )("CTXD_TOKENIZER").pipe(
    Config.withDescription("Local tokenizer, used where no exact count is made: tiktoken (BPE) or heuristic (4 characters per token)"),
    Config.withDefault("tiktoken" as const),
  ),
  cacheCapacity: Config.integer("CTXD_TOKEN_CACHE_SIZE").pipe(
    ConfigReference.within({ min: 1 }, "must be at least 1"),
    Config.withDescription("Text segments whose token counts are cached (LRU)"),
    Config.withDefault(1_024),
  ),
})

/** The counter configured by {@link config}. */
export const layerConfig: Layer.Layer<LocalCounter, ConfigError.ConfigError> = Layer.effect(
  LocalCounter,
  Effect.map(config, (options) => make(options)),
)
