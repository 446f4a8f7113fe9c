/**
 * Side requests: calls an agent makes next to its main loop (a title for
 * the conversation, a summary, a quota probe, a "who speaks next" or loop
 * classifier) that are not a turn of the main session. Taken for one, they
 * would append a foreign exchange to the session's history, or — with the
 * client's whole history — fork it on every call.
 *
 * A request is side when, in this order:
 * 1. `x-ctxd-side` says so (`1`/`true`; `0`/`false` says it is not, and wins over the rest);
 * 2. it carries Codex's `x-openai-subagent` (its compaction, review and
 *    other sub-agent calls);
 * 3. it offers no tools and asks for a JSON answer (a response schema or
 *    JSON mode: Claude Code's title call, `tools: []` with
 *    `output_config.format` `json_schema`; Gemini CLI's next-speaker and
 *    loop checks; classifiers);
 * 4. it offers no tools, holds one message, and its session is named by a
 *    header (Claude Code's title and quota calls carry the main loop's
 *    session header, the main loop always offers tools).
 *
 * A tool-less chat client whose first call rule 4 takes for side loses
 * nothing: its second call sends the whole history again, first message
 * included.
 */
import { type Headers, header } from "./ClientIds.ts"
import type { Shape } from "./Content.ts"

/** Why a request is side (undefined: it is a turn of its session). */
export type SideReason = "header" | "subagent" | "structured" | "single-toolless"

/** The header that marks (or unmarks) a side request explicitly. */
export const SIDE_HEADER = "x-ctxd-side"

const YES = new Set(["1", "true", "yes"])
const NO = new Set(["0", "false", "no"])

/** Why the request is side, or undefined; `named`: its session came from a header (ctxd's or the client's). */
export const sideReason = (shape: Shape, headers: Headers, named: boolean): SideReason | undefined => {
  const explicit = header(headers, SIDE_HEADER)?.toLowerCase()
  if (explicit !== undefined && YES.has(explicit)) return "header"
  if (explicit !== undefined && NO.has(explicit)) return undefined
  if (header(headers, "x-openai-subagent") !== undefined) return "subagent"
  if (!shape.tools && shape.structured) return "structured"
  if (!shape.tools && named && shape.messages <= 1) return "single-toolless"
  return undefined
}
