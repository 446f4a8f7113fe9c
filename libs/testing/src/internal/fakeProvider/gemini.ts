/**
 * Gemini API wire format (`POST /v1beta/models/{model}:generateContent`,
 * `POST /v1beta/models/{model}:countTokens`): validation (the adapter's,
 * `GeminiProvider.Validate`), the prompt as a token sequence, and a minimal
 * `GenerateContentResponse`. Errors in Google's shape
 * `{error: {code, message, status}}`.
 */
import { GeminiProvider } from "@ctxd/context"
import { isRecord, type Json, stableJson } from "./json.ts"
import type { ScriptedReply } from "./settings.ts"
import * as Tokens from "./tokens.ts"

/** A rejected request: the HTTP status, Google's status name and the message (the adapter's validation). */
export type Problem = GeminiProvider.Validate.Problem

/** Gemini 3 models reject a function call step of the current turn without a thought signature. */
export const requiresSignatures = GeminiProvider.Validate.requiresSignatures
/** The first problem of a `generateContent` body (REST shape) for `model`, or `undefined`. */
export const validateGenerate = GeminiProvider.Validate.validateGenerate
/** A `countTokens` body to count, or the problem. */
export const countBody = GeminiProvider.Validate.countBody

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])

const append = (out: Array<number>, ids: ArrayLike<number>): void => {
  for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
}

const appendPart = (out: Array<number>, part: unknown): void => {
  if (!isRecord(part)) return
  // the signature is opaque metadata, not prompt text
  const { thoughtSignature: _signature, ...rest } = part
  if (typeof rest["text"] === "string" && rest["thought"] !== true) return append(out, Tokens.encode(rest["text"]))
  const call = rest["functionCall"]
  if (isRecord(call)) {
    append(out, Tokens.encode(String(call["name"])))
    return append(out, Tokens.encode(stableJson(call["args"] ?? {})))
  }
  const response = rest["functionResponse"]
  if (isRecord(response)) {
    append(out, Tokens.encode(String(response["name"])))
    return append(out, Tokens.encode(stableJson(response["response"] ?? {})))
  }
  const blob = rest["inlineData"]
  if (isRecord(blob)) return append(out, Tokens.frame(`image:${String(blob["data"]).slice(0, 256)}`, Tokens.IMAGE_TOKENS))
  append(out, Tokens.encode(stableJson(rest)))
}

/**
 * A body in `@google/genai`'s parameter shape (`{model, contents, config}`)
 * in the REST shape the SDK sends; a REST body as it is.
 */
export const restShape = (body: Json): Json => {
  if (!isRecord(body["config"])) return body
  const { systemInstruction, tools, ...generation } = body["config"]
  const out: Json = { contents: body["contents"] }
  if (systemInstruction !== undefined)
    out["systemInstruction"] = typeof systemInstruction === "string" ? { parts: [{ text: systemInstruction }] } : systemInstruction
  if (tools !== undefined) out["tools"] = tools
  if (Object.keys(generation).length > 0) out["generationConfig"] = generation
  return out
}

/** The prompt (REST shape) as a token sequence: system instruction, tools, then each content with its framing. */
export const promptTokens = (body: Json): Array<number> => {
  const out: Array<number> = []
  append(out, Tokens.frame("request", Tokens.REQUEST_OVERHEAD))
  const system = body["systemInstruction"]
  if (isRecord(system)) {
    append(out, Tokens.frame("system", Tokens.MESSAGE_OVERHEAD))
    for (const part of list(system["parts"])) appendPart(out, part)
  }
  for (const tool of list(body["tools"])) {
    if (!isRecord(tool)) continue
    const declarations = list(tool["functionDeclarations"])
    for (const d of declarations) {
      append(out, Tokens.frame("tool", Tokens.TOOL_OVERHEAD))
      append(out, Tokens.encode(stableJson(d)))
    }
    const { functionDeclarations: _declarations, ...builtIn } = tool
    if (Object.keys(builtIn).length > 0) {
      append(out, Tokens.frame("tool", Tokens.TOOL_OVERHEAD))
      append(out, Tokens.encode(stableJson(builtIn)))
    }
  }
  for (const content of list(body["contents"])) {
    if (!isRecord(content)) continue
    append(out, Tokens.frame(String(content["role"] ?? "user"), Tokens.MESSAGE_OVERHEAD))
    for (const part of list(content["parts"])) appendPart(out, part)
  }
  return out
}

/** Smallest prefix Gemini's implicit cache reads, as ctxd's price table has it (`CostModel`). */
export const minCachedTokens = (model: string): number => (/^gemini-2\.5-(?:pro|flash)/i.test(model) ? 2_048 : 4_096)

/** A minimal `GenerateContentResponse` (text, or the scripted function calls; a signed first call for Gemini 3). */
export const response = (
  model: string,
  reply: ScriptedReply | undefined,
  usage: { readonly prompt: number; readonly cached: number },
  nextId: () => string,
): Json => {
  const signed = requiresSignatures(model)
  const calls = (reply?.toolCalls ?? []).map((c, i): Json => {
    const call: Json = { name: c.name, args: c.input ?? {} }
    if (c.id !== undefined) call["id"] = c.id
    const part: Json = { functionCall: call }
    if (signed && i === 0) part["thoughtSignature"] = Buffer.from(`fake-signature-${nextId()}`).toString("base64")
    return part
  })
  const text = reply?.text ?? (calls.length > 0 ? "" : `Answer to ${usage.prompt} prompt tokens.`)
  const parts: Array<Json> = []
  if (text !== "") parts.push({ text })
  parts.push(...calls)
  const candidates = Math.max(1, Tokens.count(text) + calls.reduce((n, p) => n + Tokens.count(stableJson(p["functionCall"])), 0))
  const usageMetadata: Json = {
    promptTokenCount: usage.prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: usage.prompt + candidates,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: usage.prompt }],
  }
  if (usage.cached > 0) {
    usageMetadata["cachedContentTokenCount"] = usage.cached
    usageMetadata["cacheTokensDetails"] = [{ modality: "TEXT", tokenCount: usage.cached }]
  }
  return {
    candidates: [
      {
        content: { role: "model", parts },
        finishReason: reply?.stopReason ?? "STOP",
        index: 0,
      },
    ],
    usageMetadata,
    modelVersion: model,
    responseId: nextId(),
  }
}
