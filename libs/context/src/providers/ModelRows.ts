/**
 * Every provider's model table, in one list: each adapter folder keeps its
 * provider's rows (`anthropic/Models.ts`, `openai-chat/Models.ts` for
 * OpenAI, `gemini/Models.ts`); `CostModel` and `Models` read them from here.
 * The rows' name patterns do not overlap across providers, so the order of
 * the providers does not matter.
 */
import type * as ModelRow from "../ModelRow.ts"
import * as Anthropic from "./anthropic/Models.ts"
import * as Gemini from "./gemini/Models.ts"
import * as OpenAI from "./openai-chat/Models.ts"

/** The rows of every provider, each provider's in its own order. */
export const rows: ReadonlyArray<ModelRow.Row> = [...Anthropic.rows, ...OpenAI.rows, ...Gemini.rows]
