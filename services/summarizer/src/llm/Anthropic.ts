/** The summarizer's model calls to Anthropic Messages: the I/O half of the `anthropic` adapter. */
import Anthropic from "@anthropic-ai/sdk"
import { AnthropicProvider } from "@ctxd/context"
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
    compact: (request) =>
      Calls.bounded("anthropic", timeoutMs, request.model, sdk.apiKey, (signal) =>
        // https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand: the beta on the request,
        // `compaction: {type: "summarize"}`, and one signed `compaction` block back with stop_reason "compaction"
        sdk.beta.messages.create(
          {
            model: request.model,
            max_tokens: request.maxTokens,
            messages: request.messages as Anthropic.Beta.Messages.BetaMessageParam[],
            ...(request.system === undefined ? {} : { system: request.system as Anthropic.Beta.Messages.MessageCreateParams["system"] }),
            ...(request.tools === undefined ? {} : { tools: request.tools as Anthropic.Beta.Messages.BetaToolUnion[] }),
            compaction: { type: "summarize" },
            betas: [AnthropicProvider.Validate.ON_DEMAND_COMPACTION_BETA],
          },
          { signal, timeout: timeoutMs, maxRetries: 0 },
        ),
      ).pipe(
        Effect.flatMap((message) => {
          const block = message.content.find((b) => b.type === "compaction")
          if (message.stop_reason !== "compaction" || block === undefined || typeof block.content !== "string" || block.content === "") {
            // a null content is the API's failed compaction (a no-op block): nothing to store
            return Effect.fail(
              new Calls.ProviderFailed({
                provider: "anthropic",
                reason: "unknown",
                message: `no summary came back (stop_reason ${message.stop_reason ?? "null"})`,
              }),
            )
          }
          // the operation's own usage is its `compaction` iteration when listed, else the top-level fields
          const usage = message.usage.iterations?.find((i) => i.type === "compaction") ?? message.usage
          return Effect.succeed({
            block: block as unknown as Readonly<Record<string, unknown>>,
            content: block.content,
            inputTokens: usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0),
            outputTokens: usage.output_tokens,
          })
        }),
      ),
  }
}
