/**
 * The table of the adapters' opaque-block rules ({@link OpaqueBlock.Rules}),
 * keyed by the opaque part's format: the one place a part's format picks
 * the rules that know its blocks. A table of leaf modules, not of adapters:
 * the renderers read it (through `Reasoning` and their foreign helpers), so
 * it must not import them.
 */
import * as AnthropicOpaque from "./anthropic/Opaque.ts"
import * as GeminiOpaque from "./gemini/Opaque.ts"
import type * as OpaqueBlock from "./OpaqueBlock.ts"
import * as OpenAIChatOpaque from "./openai-chat/Opaque.ts"
import * as OpenAIResponsesOpaque from "./openai-responses/Opaque.ts"

const table: { readonly [F in OpaqueBlock.Format]: OpaqueBlock.Rules<F> } = {
  anthropic: AnthropicOpaque.rules,
  openai: OpenAIChatOpaque.rules,
  "openai-responses": OpenAIResponsesOpaque.rules,
  gemini: GeminiOpaque.rules,
}

/** Every format's rules, in the contract's order. */
export const all: ReadonlyArray<OpaqueBlock.Rules> = Object.values(table)

/** The rules of opaque blocks of `format`. */
export const of = (format: OpaqueBlock.Format): OpaqueBlock.Rules => table[format]
