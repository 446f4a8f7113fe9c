/**
 * OpenAI Chat Completions usage: `prompt_tokens` include the cached ones,
 * given in `prompt_tokens_details.cached_tokens` (and, GPT-5.6+, the billed
 * writes in `cache_write_tokens`).
 */
import { Either } from "effect"
import * as UsageFields from "../UsageFields.ts"

/** Reads Chat Completions usage (`prompt_tokens`, no Anthropic/Responses `input_tokens`). */
export const reader: UsageFields.UsageReader = {
  matches: (usage) => "prompt_tokens" in usage && !("input_tokens" in usage),
  read: (usage, path) =>
    Either.gen(function* () {
      const output = yield* UsageFields.output(usage, path)
      const prompt = yield* UsageFields.field(usage, "prompt_tokens", path)
      if (prompt === undefined) return yield* Either.left({ path: `${path}.prompt_tokens`, message: "usage.prompt_tokens is missing" })
      const details = usage["prompt_tokens_details"]
      let cached = 0
      if (details !== undefined && details !== null) {
        if (!UsageFields.isRecord(details)) {
          return yield* Either.left({ path: `${path}.prompt_tokens_details`, message: "usage.prompt_tokens_details must be an object" })
        }
        cached = (yield* UsageFields.field(details, "cached_tokens", `${path}.prompt_tokens_details`)) ?? 0
      }
      if (cached > prompt) {
        return yield* Either.left({
          path: `${path}.prompt_tokens_details.cached_tokens`,
          message: `cached_tokens (${cached}) exceeds prompt_tokens (${prompt})`,
        })
      }
      const at = `${path}.prompt_tokens_details`
      return yield* UsageFields.openaiSplit(UsageFields.isRecord(details) ? details : undefined, prompt, cached, output, at)
    }),
}
