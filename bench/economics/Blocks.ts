/**
 * The bench's token counting (tiktoken, the encoding of the model) and the
 * body → cache-block conversion, both from `CacheBlocks` (shared with
 * `ctxd replay`).
 */
import { CacheBlocks, type Models } from "@ctxd/context"
import { LocalCounter } from "@ctxd/tokens"

/** Token counting under one model's encoding. */
export type Counting = CacheBlocks.Counting & { readonly encoding: LocalCounter.Encoding }

const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 200_000 })

/** Counting for `model`; message counts are memoized per message object. */
export const counting = (model: Models.ResolvedModel): Counting => CacheBlocks.counting(counter, model)

/** Turns bodies into blocks, memoizing hash and tokens per distinct block text. */
export const converter = CacheBlocks.converter
