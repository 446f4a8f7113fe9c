/** The summarizer's model calls to Gemini: the I/O half of the `gemini` adapter. */
import { FinishReason, GoogleGenAI } from "@google/genai"
import { Effect } from "effect"
import type * as SummarizerConfig from "../SummarizerConfig.ts"
import * as Calls from "./Calls.ts"

/**
 * Gemini through `@google/genai`: the system prompt as `systemInstruction`,
 * the output cap as `maxOutputTokens`, JSON asked for with
 * `responseMimeType: "application/json"`. The SDK's retries are off
 * (`retryOptions.attempts: 1`). Input tokens: `promptTokenCount` (cached
 * tokens included).
 */
export const client = (endpoint: SummarizerConfig.Endpoint, timeoutMs: number): Calls.LlmClient => {
  const apiKey = Calls.key(endpoint)
  const sdk = new GoogleGenAI({
    ...(apiKey === undefined ? {} : { apiKey }),
    httpOptions: {
      ...(endpoint.baseURL === undefined ? {} : { baseUrl: endpoint.baseURL }),
      timeout: timeoutMs,
      retryOptions: { attempts: 1 },
    },
  })
  return {
    provider: "google",
    complete: (request) =>
      Calls.bounded(
        "google",
        timeoutMs,
        request.model,
        apiKey ?? process.env["GEMINI_API_KEY"] ?? process.env["GOOGLE_API_KEY"],
        (signal) =>
          sdk.models.generateContent({
            model: request.model,
            contents: [{ role: "user", parts: [{ text: request.prompt }] }],
            config: {
              systemInstruction: request.system,
              maxOutputTokens: request.maxTokens,
              ...(request.json === true ? { responseMimeType: "application/json" } : {}),
              abortSignal: signal,
            },
          }),
      ).pipe(
        Effect.map((response) => {
          const candidate = response.candidates?.[0]
          const text = (candidate?.content?.parts ?? [])
            .flatMap((p) => (typeof p.text === "string" && p.thought !== true ? [p.text] : []))
            .join("")
          return {
            text,
            inputTokens: response.usageMetadata?.promptTokenCount ?? 0,
            outputTokens: response.usageMetadata?.candidatesTokenCount ?? 0,
            stopReason: candidate?.finishReason === FinishReason.MAX_TOKENS ? "max_tokens" : "stop",
          }
        }),
      ),
  }
}
