/**
 * OpenAI Chat Completions replay sessions → OpenAI Responses input items and
 * tools, so every workload can be replayed in that format too; the text of
 * a message's content is read here for the Gemini conversion as well.
 */
import type { OpenAI, OpenAIResponses } from "@ctxd/contracts"

/** A message's text: a string as it is, a list's text parts one per line (other parts dropped). */
export const textOf = (content: string | ReadonlyArray<{ readonly type: string }> | null | undefined): string =>
  typeof content === "string"
    ? content
    : (content ?? []).flatMap((p) => (p.type === "text" ? [(p as OpenAI.TextPart).text] : [])).join("\n")

/**
 * Converts one turn's messages: system/user/assistant messages become
 * `message` items (text content as a string; a user's image an
 * `input_image` part), each tool call a `function_call` after the
 * assistant's text (if any), each tool message a `function_call_output`.
 */
export const items = (messages: ReadonlyArray<OpenAI.Message>): Array<OpenAIResponses.Item> =>
  messages.flatMap((m): Array<OpenAIResponses.Item> => {
    switch (m.role) {
      case "system":
      case "developer":
        return [{ type: "message", role: m.role, content: textOf(m.content) }]
      case "user":
        return [
          {
            type: "message",
            role: "user",
            content:
              typeof m.content === "string"
                ? m.content
                : m.content.map((p): OpenAIResponses.ContentPart =>
                    p.type === "image_url"
                      ? {
                          type: "input_image",
                          image_url: (p as OpenAI.ImagePart).image_url.url,
                          detail: (p as OpenAI.ImagePart).image_url.detail ?? "auto",
                        }
                      : { type: "input_text", text: p.type === "text" ? (p as OpenAI.TextPart).text : JSON.stringify(p) },
                  ),
          },
        ]
      case "assistant": {
        const text = textOf(m.content)
        const items: Array<OpenAIResponses.Item> = text === "" ? [] : [{ type: "message", role: "assistant", content: text }]
        for (const call of m.tool_calls ?? []) {
          items.push({ type: "function_call", call_id: call.id, name: call.function.name, arguments: call.function.arguments })
        }
        return items
      }
      case "tool":
        return [{ type: "function_call_output", call_id: m.tool_call_id, output: textOf(m.content) }]
    }
  })

/** An OpenAI function tool as a flat Responses `function` tool. */
export const tool = (t: OpenAI.Tool): OpenAIResponses.Tool => ({
  type: "function",
  name: t.function.name,
  ...(t.function.description === undefined ? {} : { description: t.function.description }),
  ...(t.function.parameters === undefined ? {} : { parameters: t.function.parameters }),
  ...(t.function.strict === undefined ? {} : { strict: t.function.strict }),
})
