/**
 * Anthropic usage: `input_tokens` are the uncached ones; cache reads and
 * writes are billed in fields of their own.
 */
import { Either } from "effect"
import * as UsageFields from "../UsageFields.ts"

/** Reads Anthropic usage (`input_tokens` without the Responses `input_tokens_details`). */
export const reader: UsageFields.UsageReader = {
  // Responses usage has `input_tokens` too, with `input_tokens_details` and no cache fields
  matches: (usage) => "input_tokens" in usage && (!("input_tokens_details" in usage) || "cache_read_input_tokens" in usage),
  read: (usage, path) =>
    Either.gen(function* () {
      const output = yield* UsageFields.output(usage, path)
      const input = yield* UsageFields.field(usage, "input_tokens", path)
      if (input === undefined) return yield* Either.left({ path: `${path}.input_tokens`, message: "usage.input_tokens is missing" })
      const cacheRead = (yield* UsageFields.field(usage, "cache_read_input_tokens", path)) ?? 0
      const cacheWrite = (yield* UsageFields.field(usage, "cache_creation_input_tokens", path)) ?? 0
      return { style: "anthropic", input, cacheRead, cacheWrite, billedPrompt: input + cacheRead + cacheWrite, output } as const
    }),
}
