/**
 * OpenAI Responses usage: `input_tokens` include the cached ones (like Chat
 * Completions' `prompt_tokens`), given in `input_tokens_details.cached_tokens`
 * (and, GPT-5.6+, the billed writes in `cache_write_tokens`).
 */
import { Either } from "effect"
import * as UsageFields from "../UsageFields.ts"

/** Reads Responses usage (`input_tokens` with `input_tokens_details`, no Anthropic cache fields). */
export const reader: UsageFields.UsageReader = {
  matches: (usage) => "input_tokens" in usage && "input_tokens_details" in usage && !("cache_read_input_tokens" in usage),
  read: (usage, path) =>
    Either.gen(function* () {
      const output = yield* UsageFields.output(usage, path)
      const prompt = yield* UsageFields.field(usage, "input_tokens", path)
      if (prompt === undefined) return yield* Either.left({ path: `${path}.input_tokens`, message: "usage.input_tokens is missing" })
      const at = `${path}.input_tokens_details`
      const details = usage["input_tokens_details"]
      let cached = 0
      if (details !== undefined && details !== null) {
        if (!UsageFields.isRecord(details))
          return yield* Either.left({ path: at, message: `usage.${at.slice(path.length + 1)} must be an object` })
        cached = (yield* UsageFields.field(details, "cached_tokens", at)) ?? 0
        if (cached > prompt)
          return yield* Either.left({ path: `${at}.cached_tokens`, message: `cached_tokens (${cached}) exceeds input_tokens (${prompt})` })
      }
      return yield* UsageFields.openaiSplit(UsageFields.isRecord(details) ? details : undefined, prompt, cached, output, at)
    }),
}
