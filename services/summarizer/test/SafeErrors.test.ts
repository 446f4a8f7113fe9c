// The provider SDKs' own error classes, built as the SDKs build them from an
// error answer that echoes the prompt: the message ctxd keeps (for logs,
// replies and the compaction audit) names the status, the provider's error
// type and code, the request id and the body's size, never the body.
import Anthropic from "@anthropic-ai/sdk"
import { ApiError } from "@google/genai"
import { ProviderErrors } from "@ctxd/observe"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"

const MARKER = "PROMPT-TEXT-5678"

describe("ProviderErrors.safeMessage of the SDKs' errors", () => {
  it("Anthropic: status, type, request id, size", () => {
    const body = { type: "error", error: { type: "invalid_request_error", message: `bad: ${MARKER}` } }
    const error = new Anthropic.BadRequestError(400, body, undefined, new Headers({ "request-id": "req_a1" }))
    expect(error.message).toContain(MARKER) // the SDK's own message holds the body
    const message = ProviderErrors.safeMessage(error)
    expect(message).toBe(`400 invalid_request_error (request req_a1, ${JSON.stringify(body).length}-char body withheld)`)
  })

  it("OpenAI: status, type, code, request id", () => {
    const body = { message: `bad: ${MARKER}`, type: "invalid_request_error", code: "context_length_exceeded", param: null }
    const error = new OpenAI.BadRequestError(400, body, undefined, new Headers({ "x-request-id": "req_o1" }))
    expect(error.message).toContain(MARKER)
    expect(ProviderErrors.safeMessage(error)).toMatch(
      /^400 invalid_request_error \(code context_length_exceeded, request req_o1, \d+-char body withheld\)$/,
    )
  })

  it("Gemini: status and the API's status name", () => {
    const error = new ApiError({
      message: JSON.stringify({ error: { code: 400, message: `bad: ${MARKER}`, status: "INVALID_ARGUMENT" } }),
      status: 400,
    })
    expect(ProviderErrors.safeMessage(error)).toMatch(/^400 INVALID_ARGUMENT \(\d+-char body withheld\)$/)
  })

  it("connection errors keep the SDK's message; parser errors never quote what they read", () => {
    expect(ProviderErrors.safeMessage(new Anthropic.APIConnectionError({ message: "Connection error." }))).toBe("Connection error.")
    let parseError: unknown
    try {
      JSON.parse(`not json ${MARKER}`)
    } catch (e) {
      parseError = e
    }
    expect(ProviderErrors.safeMessage(parseError)).not.toContain(MARKER)
    expect(
      ProviderErrors.redact(
        new Error("wrapped", { cause: new OpenAI.BadRequestError(400, { message: MARKER }, undefined, new Headers()) }),
      ),
    ).toMatchObject({
      message: "wrapped",
      cause: { message: expect.not.stringContaining(MARKER) },
    })
  })
})
