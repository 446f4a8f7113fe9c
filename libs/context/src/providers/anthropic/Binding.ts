/**
 * Anthropic's preserved thinking: which model reads which model's thinking
 * blocks, and the block-binding controls of a request.
 *
 * - The model check: "Each model reads its own thinking blocks and those of a
 *   fixed set of other models. Claude Fable 5.1 reads blocks from Claude Opus
 *   5 and, on the Claude API, from Claude Opus 5.5; neither Claude Opus 5 nor
 *   Claude Opus 5.5 reads blocks from Claude Fable 5.1. If the current model
 *   can't read a block, the API drops it from that request without an error."
 *   https://platform.claude.com/docs/en/build-with-claude/preserved-thinking
 *   Claude Haiku 5.5's blocks "are not locked to the model that produced them
 *   and replay unchanged on other models", while other models' blocks sent to
 *   Haiku 5.5 are dropped (`model_binding_mismatch`):
 *   https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-thinking-block-binding.html
 *   Which other pairs read each other is not listed: none is assumed (the
 *   Mythos and Fable variants of one version included), so a switch between
 *   them leaves the older reasoning out rather than sending blocks the API
 *   would drop.
 * - The controls: `thinking.block_binding.prefix_mismatch_behavior` —
 *   `"error"` (the default: a 400) or `"drop_block"` (the failing blocks are
 *   removed and listed in the response's `input_transformations`), behind the
 *   beta header {@link BETA} (SDK type `BetaThinkingBlockBinding`).
 */

/** The `anthropic-beta` value the block-binding controls and `input_transformations` need. */
export const BETA = "thinking-binding-controls-2026-08-01"

/** A model name without its date suffix and with dots as dashes: `claude-opus-5-5`. */
export const modelKey = (name: string): string =>
  name
    .toLowerCase()
    .replace(/\./g, "-")
    .replace(/-\d{8}$/, "")
    .replace(/-latest$/, "")

/** Models whose blocks a model reads besides its own (documented pairs only, see the module comment). */
const READS: Readonly<Record<string, ReadonlyArray<string>>> = {
  "claude-fable-5-1": ["claude-opus-5", "claude-opus-5-5"],
}

/** Models whose blocks replay on any other model. */
const PORTABLE: ReadonlySet<string> = new Set(["claude-haiku-5-5"])

/** True when `reader` can use a thinking block `producer` wrote (the model check). */
export const reads = (reader: string, producer: string): boolean => {
  const r = modelKey(reader)
  const p = modelKey(producer)
  if (r === p) return true
  if (PORTABLE.has(r)) return false
  return PORTABLE.has(p) || (READS[r] ?? []).includes(p)
}

/** The `thinking` parameter ctxd puts in a body that must not fail on a bound block (merged into the runtime's own). */
export const dropBlockThinking = { type: "adaptive", block_binding: { prefix_mismatch_behavior: "drop_block" } } as const
