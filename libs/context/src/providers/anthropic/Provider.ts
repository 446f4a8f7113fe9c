/**
 * Anthropic as a model provider: its own tokenizer (unpublished; counted by
 * `count_tokens`, any format's turn, since the count endpoint reads the
 * neutral conversation rendered as Messages), so stored counts of every
 * Claude model are kept under one name; Claude model names; Messages bodies.
 */
import type * as ModelProvider from "../ModelProvider.ts"
import * as Api from "./Api.ts"

/** The Anthropic descriptor. */
export const descriptor: ModelProvider.ModelProvider<"anthropic"> = {
  provider: "anthropic",
  tokenizer: { family: "claude", stored: "anthropic" },
  modelNames: /^claude/i,
  exactCount: { backend: "anthropic_api", formatProblem: () => undefined, bodyProblem: () => undefined },
  localBody: { contents: false, chatFields: false },
  api: Api.api,
}
