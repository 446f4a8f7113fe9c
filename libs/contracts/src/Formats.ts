/** The wire formats a turn may come in, the providers a model may be of, and the tool compression levels. */
import { Schema } from "effect"

export const Format = Schema.Literal("anthropic", "openai", "openai-responses", "gemini")
export type Format = typeof Format.Type

export const Provider = Schema.Literal("anthropic", "openai", "google")
export type Provider = typeof Provider.Type

/** Tool schema compression levels, weakest first. */
export const ToolCompression = Schema.Literal("none", "minify", "truncate", "aggressive")
export type ToolCompression = typeof ToolCompression.Type
