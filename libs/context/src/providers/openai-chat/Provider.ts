/**
 * OpenAI as a model provider (shared by the Chat Completions and Responses
 * adapters): tiktoken vocabularies (stored counts are kept per vocabulary),
 * the Responses `input_tokens` count endpoint, which cannot count Chat
 * Completions (its framing differs), and Chat Completions' own message
 * fields in a local body count. OpenAI is the default provider of a model
 * name no provider claims.
 */
import type * as ModelProvider from "../ModelProvider.ts"
import * as Api from "./Api.ts"

/** True for a Responses body (`input`, or no `messages`); else a Chat Completions one. */
export const isResponsesBody = (body: Readonly<Record<string, unknown>>): boolean => !("messages" in body) || "input" in body

/** The OpenAI descriptor. */
export const descriptor: ModelProvider.ModelProvider<"openai"> = {
  provider: "openai",
  tokenizer: { family: "gpt", stored: undefined },
  modelNames: undefined,
  exactCount: {
    backend: "openai_api",
    formatProblem: (format) => (format === "openai" ? "chat_completions" : undefined),
    bodyProblem: (body) => (isResponsesBody(body) ? undefined : "chat_completions"),
  },
  localBody: { contents: false, chatFields: true },
  api: Api.api,
}
