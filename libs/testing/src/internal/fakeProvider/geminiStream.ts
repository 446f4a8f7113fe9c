/**
 * Gemini's `POST /v1beta/models/{model}:streamGenerateContent`
 * (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent):
 * the same `GenerateContentResponse` cut into chunks. With `?alt=sse` (what
 * `@google/genai` and Gemini CLI ask for) each chunk is one server-sent
 * event `data: <json>` ended by a blank line, CRLF-framed as Google's
 * servers send them; without it the body is one JSON array of the chunks.
 * Text is cut into several chunks, a function call comes whole in a chunk
 * of its own; every chunk carries `usageMetadata` with the prompt's counts,
 * the last one the final counts and the `finishReason`.
 */
import { isRecord, type Json } from "./json.ts"

/** Text is cut into chunks of this many characters. */
const CHUNK_CHARS = 24

/** The chunks of a complete response (the object `generateContent` returns). */
export const chunks = (response: Json): Array<Json> => {
  const candidate = Array.isArray(response["candidates"]) && isRecord(response["candidates"][0]) ? response["candidates"][0] : {}
  const content = isRecord(candidate["content"]) ? candidate["content"] : {}
  const parts = Array.isArray(content["parts"]) ? content["parts"].filter(isRecord) : []
  const pieces: Array<Json> = []
  for (const part of parts) {
    if (typeof part["text"] !== "string" || part["text"].length <= CHUNK_CHARS) {
      pieces.push(part)
      continue
    }
    const text = part["text"]
    for (let i = 0; i < text.length; i += CHUNK_CHARS) pieces.push({ ...part, text: text.slice(i, i + CHUNK_CHARS) })
  }
  if (pieces.length === 0) pieces.push({ text: "" })
  const usage = isRecord(response["usageMetadata"]) ? response["usageMetadata"] : {}
  const prompt = Number(usage["promptTokenCount"] ?? 0)
  const partial: Json = { promptTokenCount: prompt, totalTokenCount: prompt }
  return pieces.map((part, i) => {
    const last = i === pieces.length - 1
    const chunkCandidate: Json = { content: { role: "model", parts: [part] }, index: 0 }
    if (last) chunkCandidate["finishReason"] = candidate["finishReason"] ?? "STOP"
    return {
      candidates: [chunkCandidate],
      usageMetadata: last ? usage : partial,
      modelVersion: response["modelVersion"],
      responseId: response["responseId"],
    }
  })
}

/** The SSE frames of `?alt=sse`. */
export const sseFrames = (response: Json): Array<string> => chunks(response).map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`)
