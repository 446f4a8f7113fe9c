/** The summarizer's model calls to Anthropic Messages: the I/O half of the `anthropic` adapter. */
import Anthropic from "@anthropic-ai/sdk"
import { Effect } from "effect"
import type * as SummarizerConfig from "../SummarizerConfig.ts"
import * as Calls from "./Calls.ts"

/** The Anthropic Messages client (`@anthropic-ai/sdk`); input tokens: uncached + cache read + cache write. */
export const client = (endpoint: SummarizerConfig.Endpoint, timeoutMs: number): Calls.LlmClient => {
  const apiKey = Calls.key(endpoint)
  const sdk = new Anthropic({
    ...(endpoint.baseURL === undefined ? {} : { baseURL: endpoint.baseURL }),
    ...(apiKey === undefined ? {} : { apiKey }),
    maxRetries: 0,
    timeout: timeoutMs,
  })
  return {
    provider: "anthropic",
    complete: (request) =>
      Calls.bounded("anthropic", timeoutMs, request.model, sdk.apiKey, (signal) =>
        sdk.messages.create(
          {
            model: request.model,
            max_tokens: request.maxTokens,
            system: request.system,
            messages: [{ role: "user", content: request.prompt }],
          },
          { signal, timeout: timeoutMs, maxRetries: 0 },
        ),
      ).pipe(
        Effect.map((message) => ({
          text: message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join(""),
          inputTokens:
            message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0) + (message.usage.cache_creation_input_tokens ?? 0),
          outputTokens: message.usage.output_tokens,
          stopReason: message.stop_reason ?? "end_turn",
        })),
      ),
  }
}
