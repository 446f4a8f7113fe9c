/**
 * The exact backend for OpenAI: `POST /v1/responses/input_tokens` through the
 * official `openai` SDK (`client.responses.inputTokens.count(...)`, with
 * `new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout })`), behind its own
 * breaker, bulkhead, timeout, single flight and cache
 * ({@link ExactCounter.makeCalls}).
 *
 * Segment-wise, like {@link AnthropicCounter}: a turn counts only its new
 * messages (older ones carry stored counts). OpenAI frames every input item
 * on its own, so counts of items add up; the exceptions are handled in
 * `OpenAIResponsesProvider.CountBody`:
 * - `instructions` and `tools` are read together (one developer message), so
 *   they are counted as one prefix segment (cached: a warm session pays
 *   nothing for it), and the tools alone split it into `toolsTokens` and
 *   `systemTokens`;
 * - the batch of new messages is counted after a `"."` user message, whose
 *   cost (the `plain` baseline, once per model) is subtracted; the framing of
 *   a request (`plain` minus one message) is reported with the system block;
 * - unpaired tool calls/outputs and reasoning items make the turn's count
 *   `approximate` (exact false).
 *
 * The endpoint counts a Responses request. A Chat Completions request has no
 * count endpoint: its turns and bodies are counted locally (the token
 * counter routes them; see `TokenCounter`).
 */
import { Effect, type Scope } from "effect"
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from "openai"
import * as ExactCounter from "./ExactCounter.ts"
import { OpenAIChatProvider, OpenAIResponsesProvider } from "@ctxd/context"

/** The exact backend for OpenAI (the common port). */
export type OpenAICounter = ExactCounter.ExactCounter

/** Top-level keys `input_tokens` accepts; the rest of a Responses body (`max_output_tokens`, `store`, `prompt_cache_key`...) is dropped. */
const COUNT_KEYS: ReadonlySet<string> = new Set([
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "previous_response_id",
  "conversation",
  "reasoning",
  "text",
  "truncation",
])

const classify = ExactCounter.classifySdkError({ APIConnectionTimeoutError, APIConnectionError, APIError })

/** True for a Responses body (`input` / `instructions`), false for a Chat Completions one (`messages`). */
export const isResponsesBody: (body: Readonly<Record<string, unknown>>) => boolean = OpenAIChatProvider.Provider.isResponsesBody

/** Builds the exact backend; its calls run in the current scope. */
export const make = (options: ExactCounter.Options = {}): Effect.Effect<OpenAICounter, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMs = options.timeoutMs ?? 2_000
    const apiKey = ExactCounter.keyOf(options.apiKey, "OPENAI_API_KEY")
    const client = new OpenAI({
      ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
      // the SDK throws at construction without a key; a base URL alone (a gateway, the fake provider) needs none
      apiKey: apiKey ?? "unset",
      maxRetries: 0,
      timeout: timeoutMs,
    })
    const calls = yield* ExactCounter.makeCalls(
      {
        name: "openai responses.input_tokens",
        span: "openai.responses.input_tokens",
        system: "openai",
        request: (model, body, signal) =>
          client.responses.inputTokens
            .count({ ...body, model } as OpenAI.Responses.InputTokenCountParams, { signal, timeout: timeoutMs, maxRetries: 0 })
            .then((r) => r.input_tokens),
        classify,
        secret: client.apiKey,
      },
      options,
    )
    const plain = OpenAIResponsesProvider.CountBody.envelopeBody("plain")

    const segment = (model: string, body: Readonly<Record<string, unknown>>) => calls.segment(model, "plain", plain, body)

    const countTurn = (input: ExactCounter.TurnInput) => {
      const prefix = OpenAIResponsesProvider.CountBody.prefixBody(input.model, input.system, input.tools)
      const tools = input.tools.length > 0 ? OpenAIResponsesProvider.CountBody.toolsBody(input.model, input.tools) : undefined
      const batch = input.messages.length === 0 ? undefined : OpenAIResponsesProvider.CountBody.batch(input.model, input.messages)
      return ExactCounter.prefixedTurn({
        framing: ExactCounter.framing(calls, input.model, plain, OpenAIResponsesProvider.CountBody.envelopeBody("twoDots")),
        prefix: prefix === undefined ? undefined : segment(input.model, prefix),
        tools: tools === undefined ? undefined : segment(input.model, tools),
        batch: batch === undefined ? undefined : { tokens: segment(input.model, batch.body), approximate: batch.approximate },
        weights: input.weights,
      })
    }

    const countBody = (model: string, body: Readonly<Record<string, unknown>>) =>
      calls.cached(model, Object.fromEntries(Object.entries(body).filter(([k]) => COUNT_KEYS.has(k))))

    const countText = (model: string, text: string) =>
      text.trim() === ""
        ? Effect.succeed(0)
        : calls.segment(
            model,
            "emptyUser",
            OpenAIResponsesProvider.CountBody.envelopeBody("emptyUser"),
            OpenAIResponsesProvider.CountBody.textBody(text),
          )

    return { provider: "openai", backend: "openai_api", countTurn, countBody, countText, breaker: calls.breaker, stats: calls.stats }
  })
