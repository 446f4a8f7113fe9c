/**
 * Google as a model provider: Gemini's SentencePiece vocabulary (stored
 * counts are kept per local vocabulary), `countTokens`, which counts only
 * Gemini `contents` (a turn in another format is counted locally), Gemini
 * model names and `contents` bodies.
 */
import type * as ModelProvider from "../ModelProvider.ts"
import * as Api from "./Api.ts"

/** The Google descriptor. */
export const descriptor: ModelProvider.ModelProvider<"google"> = {
  provider: "google",
  tokenizer: { family: "gemini", stored: undefined },
  modelNames: /^gemini/i,
  exactCount: {
    backend: "google_api",
    formatProblem: (format) => (format === "gemini" ? undefined : "unsupported_format"),
    bodyProblem: () => undefined,
  },
  localBody: { contents: true, chatFields: false },
  api: Api.api,
}
