/**
 * OpenAI Chat Completions replay sessions → Gemini contents and function
 * declarations, so every workload can be replayed in that format too.
 */
import type { Gemini, OpenAI } from "@ctxd/contracts"
import { textOf } from "./responses.ts"

/** Parsed tool-call arguments; anything that is not a JSON object becomes `{}`. */
const geminiArgs = (raw: string): Record<string, unknown> => {
  try {
    const parsed: unknown = JSON.parse(raw)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

/**
 * A converter of one session's turns, to be called on each turn in order: a
 * tool message's `functionResponse` is named after its call, which an
 * earlier turn may have made. Call ids are kept only with `ids`.
 */
export const contents = (ids: boolean): ((messages: ReadonlyArray<OpenAI.Message>) => Array<Gemini.Content>) => {
  const names = new Map<string, string>()
  return (messages) => {
    const out: Array<{ role: "user" | "model"; parts: Array<Gemini.Part> }> = []
    const push = (role: "user" | "model", parts: ReadonlyArray<Gemini.Part>) => {
      if (parts.length === 0) return
      const last = out[out.length - 1]
      if (last?.role === role) last.parts.push(...parts)
      else out.push({ role, parts: [...parts] })
    }
    for (const m of messages) {
      switch (m.role) {
        case "system":
        case "developer": {
          const text = textOf(m.content)
          push("user", text === "" ? [] : [{ text }])
          break
        }
        case "user": {
          if (typeof m.content === "string") {
            push("user", m.content === "" ? [] : [{ text: m.content }])
            break
          }
          push(
            "user",
            m.content.flatMap((p): Array<Gemini.Part> => {
              if (p.type === "text") return (p as OpenAI.TextPart).text === "" ? [] : [{ text: (p as OpenAI.TextPart).text }]
              if (p.type === "image_url") {
                const url = (p as OpenAI.ImagePart).image_url.url
                const match = /^data:([^;,]+);base64,(.*)$/s.exec(url)
                return [match === null ? { text: `[image: ${url}]` } : { inlineData: { mimeType: match[1]!, data: match[2]! } }]
              }
              return [{ text: JSON.stringify(p) }]
            }),
          )
          break
        }
        case "assistant": {
          const text = textOf(m.content)
          const parts: Array<Gemini.Part> = text === "" ? [] : [{ text }]
          for (const call of m.tool_calls ?? []) {
            names.set(call.id, call.function.name)
            const functionCall = { name: call.function.name, args: geminiArgs(call.function.arguments) }
            parts.push({ functionCall: ids ? { ...functionCall, id: call.id } : functionCall })
          }
          push("model", parts)
          break
        }
        case "tool": {
          const functionResponse = { name: names.get(m.tool_call_id) ?? "unknown", response: { output: textOf(m.content) } }
          push("user", [{ functionResponse: ids ? { ...functionResponse, id: m.tool_call_id } : functionResponse }])
          break
        }
      }
    }
    return out
  }
}

/** An OpenAI function tool as a Gemini function declaration (`parametersJsonSchema`). */
export const declaration = (t: OpenAI.Tool): Gemini.FunctionDeclaration => ({
  name: t.function.name,
  ...(t.function.description === undefined ? {} : { description: t.function.description }),
  ...(t.function.parameters === undefined ? {} : { parametersJsonSchema: t.function.parameters }),
})
