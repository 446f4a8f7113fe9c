/**
 * OpenAI Chat Completions replay sessions → Anthropic Messages, so every
 * workload can be replayed in both formats.
 */
import type { Anthropic, OpenAI } from "@ctxd/contracts"

const textOf = (content: OpenAI.Message["content"]): string => {
  if (content === undefined || content === null) return ""
  if (typeof content === "string") return content
  return content.map((part) => (part.type === "text" ? (part as OpenAI.TextPart).text : "")).join("")
}

/** Parsed tool-call arguments; anything that is not a JSON object is kept under `_raw`. */
const parseArguments = (text: string): Record<string, unknown> => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : { _raw: text }
  } catch {
    return { _raw: text }
  }
}

/**
 * Converts one turn's messages:
 * - `assistant`: text (when non-empty) then one `tool_use` block per tool call,
 *   with the arguments parsed;
 * - consecutive `tool` messages: one `user` message of `tool_result` blocks;
 * - `user`: kept (string content stays a string);
 * - `system`/`developer` inside the messages (not in the workloads): a user
 *   message, as Anthropic has no system role in `messages`.
 */
export const messages = (input: ReadonlyArray<OpenAI.Message>): Array<Anthropic.Message> => {
  const out: Array<Anthropic.Message> = []
  let results: Array<Anthropic.ToolResultBlock> | undefined
  const flush = () => {
    if (results !== undefined) out.push({ role: "user", content: results })
    results = undefined
  }
  for (const message of input) {
    if (message.role === "tool") {
      results ??= []
      results.push({ type: "tool_result", tool_use_id: message.tool_call_id, content: textOf(message.content) })
      continue
    }
    flush()
    switch (message.role) {
      case "assistant": {
        const text = textOf(message.content)
        const calls = message.tool_calls ?? []
        if (calls.length === 0) {
          out.push({ role: "assistant", content: text })
          break
        }
        const blocks: Array<Anthropic.ContentBlock> = text.length > 0 ? [{ type: "text", text }] : []
        for (const call of calls) {
          blocks.push({ type: "tool_use", id: call.id, name: call.function.name, input: parseArguments(call.function.arguments) })
        }
        out.push({ role: "assistant", content: blocks })
        break
      }
      case "user":
        out.push({ role: "user", content: typeof message.content === "string" ? message.content : textOf(message.content) })
        break
      default:
        out.push({ role: "user", content: textOf(message.content) })
    }
  }
  flush()
  return out
}

/** An OpenAI function tool as an Anthropic tool (ctxd's `toolset`/`annotations` kept). */
export const tool = (input: OpenAI.Tool): Anthropic.Tool => ({
  name: input.function.name,
  ...(input.function.description === undefined ? {} : { description: input.function.description }),
  input_schema: input.function.parameters ?? { type: "object", properties: {} },
  ...(input.toolset === undefined ? {} : { toolset: input.toolset }),
  ...(input.annotations === undefined ? {} : { annotations: input.annotations }),
})
