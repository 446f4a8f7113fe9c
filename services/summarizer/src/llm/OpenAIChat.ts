/** The summarizer's model calls to Chat Completions: the I/O half of the `openai-chat` adapter. */
import { Effect } from "effect"
import OpenAI from "openai"
import type * as SummarizerConfig from "../SummarizerConfig.ts"
import * as Calls from "./Calls.ts"

/**
 * The Chat Completions client (`openai`): OpenAI's own API (`official`) or an
 * OpenAI-compatible server (`provider` `openai_compatible`).
 */
export const client = (
  provider: "openai" | "openai_compatible",
  endpoint: SummarizerConfig.Endpoint,
  timeoutMs: number,
): Calls.LlmClient => {
  const official = provider !== "openai_compatible"
  // A self-hosted server often has no key; the SDK insists on one.
  const apiKey = Calls.key(endpoint) ?? (official ? undefined : "none")
  const sdk = new OpenAI({
    ...(endpoint.baseURL === undefined ? {} : { baseURL: endpoint.baseURL }),
    ...(apiKey === undefined ? {} : { apiKey }),
    maxRetries: 0,
    timeout: timeoutMs,
  })
  return {
    provider,
    complete: (request) =>
      Calls.bounded(provider, timeoutMs, request.model, sdk.apiKey, (signal) =>
        sdk.chat.completions.create(
          {
            model: request.model,
            messages: [
              { role: "system", content: request.system },
              { role: "user", content: request.prompt },
            ],
            // OpenAI's own API wants max_completion_tokens; compatible servers mostly know only max_tokens.
            ...(official ? { max_completion_tokens: request.maxTokens } : { max_tokens: request.maxTokens }),
            ...(request.json === true && official ? { response_format: { type: "json_object" as const } } : {}),
          },
          { signal, timeout: timeoutMs, maxRetries: 0 },
        ),
      ).pipe(
        Effect.map((completion) => {
          const choice = completion.choices[0]
          return {
            text: choice?.message.content ?? "",
            inputTokens: completion.usage?.prompt_tokens ?? 0,
            outputTokens: completion.usage?.completion_tokens ?? 0,
            stopReason: choice?.finish_reason ?? "stop",
          }
        }),
      ),
  }
}
