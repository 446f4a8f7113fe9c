/**
 * What each adapter says about its own opaque blocks (the parts ctxd keeps
 * verbatim without interpreting them): which are the model's reasoning,
 * which are the provider's compaction, and how one reads as text in another
 * format. Each adapter folder holds its part as a leaf module (`Opaque.ts`,
 * importing nothing of the registry or the renderers), so the neutral
 * modules the renderers import (`Reasoning`, the renderers' shared foreign
 * helpers) can read them without an import cycle; {@link Opaque} is their
 * table.
 */
import type { Conversation } from "@ctxd/contracts"

/** An opaque part's format: the request formats, and `openai` Chat Completions' own parts. */
export type Format = Conversation.OpaquePart["format"]

/** One format's rules for its opaque blocks. */
export interface Rules<F extends Format = Format> {
  readonly format: F
  /** True for a block that is the model's reasoning (thinking, a reasoning item, a thought). */
  readonly isReasoning: (block: unknown) => boolean
  /** The `type` of the blocks that are this provider's compaction (absent: it has none). */
  readonly compaction: string | undefined
  /**
   * The text a non-reasoning, non-compaction block of this format stands for
   * in another format's body (`undefined`: nothing, the block is dropped).
   */
  readonly note: (part: Conversation.OpaquePart) => string | undefined
  /** True when model `reader` can use reasoning `producer` wrote (absent: only its own). */
  readonly reads?: ((reader: string, producer: string) => boolean) | undefined
  /**
   * What a body adds so that bound reasoning failing the provider's prefix
   * check is dropped instead of failing the request, and the header the
   * runtime must send with it (absent: the provider has no such control).
   */
  readonly dropFailing?: { readonly body: { readonly [key: string]: unknown }; readonly betaHeader: string } | undefined
  /**
   * The first reasoning a turn request's history field (`items`, raw, under
   * `field`) carries that the provider would refuse once sent back (a
   * thinking block without its signature, a reasoning item without the item
   * it led to): its path and why; absent: nothing to check.
   */
  readonly inputProblem?: ((items: unknown, field: string) => { readonly path: string; readonly message: string } | undefined) | undefined
}

/** True for a plain object (not an array). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The `type` of an opaque block, or `"unknown"`. */
export const blockType = (block: unknown): string => (isRecord(block) && typeof block["type"] === "string" ? block["type"] : "unknown")

/** The note of a block that means nothing elsewhere: `[<format> <type> block omitted]`. */
export const omitted = (format: Format, type: string): string => `[${format} ${type} block omitted]`
