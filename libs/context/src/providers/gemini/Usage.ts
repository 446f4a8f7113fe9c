/**
 * Gemini `usageMetadata`: `promptTokenCount` includes the cached tokens
 * (`cachedContentTokenCount`); output is candidates plus thoughts.
 */
import { Either } from "effect"
import * as UsageFields from "../UsageFields.ts"

/** Reads Gemini usage (`promptTokenCount`, and neither OpenAI's nor Anthropic's input field). */
export const reader: UsageFields.UsageReader = {
  matches: (usage) => "promptTokenCount" in usage && !("input_tokens" in usage) && !("prompt_tokens" in usage),
  read: (usage, path) =>
    Either.gen(function* () {
      // read in the order the shared reader always did, so the first problem reported stays the same
      yield* UsageFields.output(usage, path)
      const prompt = yield* UsageFields.field(usage, "promptTokenCount", path)
      if (prompt === undefined)
        return yield* Either.left({ path: `${path}.promptTokenCount`, message: "usage.promptTokenCount is missing" })
      const cached = (yield* UsageFields.field(usage, "cachedContentTokenCount", path)) ?? 0
      if (cached > prompt) {
        return yield* Either.left({
          path: `${path}.cachedContentTokenCount`,
          message: `cachedContentTokenCount (${cached}) exceeds promptTokenCount (${prompt})`,
        })
      }
      const candidates = yield* UsageFields.field(usage, "candidatesTokenCount", path)
      const thoughts = yield* UsageFields.field(usage, "thoughtsTokenCount", path)
      const output = candidates === undefined && thoughts === undefined ? undefined : (candidates ?? 0) + (thoughts ?? 0)
      return { style: "openai", input: prompt - cached, cacheRead: cached, cacheWrite: 0, billedPrompt: prompt, output } as const
    }),
}
