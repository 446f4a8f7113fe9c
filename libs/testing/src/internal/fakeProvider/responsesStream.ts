/**
 * The Responses API's stream (`POST /v1/responses` with `stream: true`), as
 * the streaming events reference describes it
 * (https://developers.openai.com/api/reference/resources/responses/streaming-events):
 * `event: <type>` / `data: <json>` frames, each with a rising
 * `sequence_number`; `response.created` and `response.in_progress` carry the
 * response without output and with `status: "in_progress"`; each output item
 * is opened by `response.output_item.added` and closed by
 * `response.output_item.done`, a message's text by
 * `response.content_part.added`, `response.output_text.delta`(s),
 * `response.output_text.done`, `response.content_part.done`, a function
 * call's arguments by `response.function_call_arguments.delta` /
 * `.done`; the stream ends with `response.completed` (the whole response,
 * `usage` included: where a gateway reads it). No `data: [DONE]` (that
 * sentinel is Chat Completions').
 */
import { isRecord, type Json } from "./json.ts"

/** Text is cut into deltas of this many characters (several deltas, as the real stream sends). */
const DELTA_CHARS = 16

const pieces = (text: string): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += DELTA_CHARS) out.push(text.slice(i, i + DELTA_CHARS))
  return out.length === 0 ? [""] : out
}

/** The item as `output_item.added` shows it: in progress, without its text or arguments yet. */
const opened = (item: Json): Json => {
  if (item["type"] === "message") return { ...item, status: "in_progress", content: [] }
  if (item["type"] === "function_call") return { ...item, status: "in_progress", arguments: "" }
  return item
}

/** The SSE frames of a complete `response` (the object the non-streamed call returns). */
export const events = (response: Json): Array<string> => {
  let seq = 0
  const frames: Array<string> = []
  const emit = (type: string, data: Json) => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`)
  }
  const output = Array.isArray(response["output"]) ? response["output"].filter(isRecord) : []
  const pending = { ...response, status: "in_progress", output: [], usage: null }
  emit("response.created", { response: pending })
  emit("response.in_progress", { response: pending })
  output.forEach((item, outputIndex) => {
    const itemId = String(item["id"])
    emit("response.output_item.added", { output_index: outputIndex, item: opened(item) })
    if (item["type"] === "message") {
      const parts = Array.isArray(item["content"]) ? item["content"].filter(isRecord) : []
      parts.forEach((part, contentIndex) => {
        const where = { item_id: itemId, output_index: outputIndex, content_index: contentIndex }
        const text = String(part["text"] ?? "")
        emit("response.content_part.added", { ...where, part: { ...part, text: "" } })
        for (const delta of pieces(text)) emit("response.output_text.delta", { ...where, delta, logprobs: [] })
        emit("response.output_text.done", { ...where, text, logprobs: [] })
        emit("response.content_part.done", { ...where, part })
      })
    } else if (item["type"] === "function_call") {
      const args = String(item["arguments"] ?? "")
      for (const delta of pieces(args)) {
        emit("response.function_call_arguments.delta", { item_id: itemId, output_index: outputIndex, delta })
      }
      emit("response.function_call_arguments.done", { item_id: itemId, output_index: outputIndex, arguments: args })
    }
    emit("response.output_item.done", { output_index: outputIndex, item })
  })
  emit("response.completed", { response })
  return frames
}
