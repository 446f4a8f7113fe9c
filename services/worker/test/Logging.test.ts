// The log scrubber: the secret values of the environment (API keys, NATS
// password, token and seed, passwords inside DATABASE_URL and NATS_URL) are
// replaced in every line, raw or JSON-escaped, whatever echoed them.
import { Cause, Effect } from "effect"
import { Writable } from "node:stream"
import { describe, expect, it } from "vitest"
import * as Logging from "../src/Logging.ts"

describe("Logging secrets", () => {
  it("finds the secrets of the environment", () => {
    const secrets = Logging.secretsOf({
      ANTHROPIC_API_KEY: "sk-ant-123456",
      NATS_TOKEN: " tok-abcdef ",
      NATS_PASSWORD: "abc", // too short to be worth hiding
      DATABASE_URL: "postgresql://ctxd:p%40ss-word@db:5432/ctxd?sslmode=require",
      NATS_URL: "tls://ctxd:nats-pw-1@a:4222, nats://tokenvalue@b:4222,nats://c:4222",
      LOG_LEVEL: "debug",
    })
    expect([...secrets].sort()).toEqual(["nats-pw-1", "p%40ss-word", "p@ss-word", "sk-ant-123456", "tok-abcdef", "tokenvalue"].sort())
    expect(Logging.secretsOf({ DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/postgres" })).toEqual([])
  })

  it("scrubs raw and JSON-escaped secrets from a line", () => {
    const secrets = ['pa"ss\\word', "sk-123456"]
    const line = JSON.stringify({ msg: `401 invalid key sk-123456, again sk-123456`, err: 'pa"ss\\word' })
    const scrubbed = Logging.scrub(line, secrets)
    expect(scrubbed).not.toContain("sk-123456")
    expect(scrubbed).not.toContain("ss\\\\word")
    expect(JSON.parse(scrubbed)).toEqual({ msg: "401 invalid key [redacted], again [redacted]", err: "[redacted]" })
  })

  it("the worker's logger writes no secret", () => {
    let out = ""
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((out += chunk.toString("utf8")), done()) })
    const layer = Logging.layer({ level: "info", name: "test", secrets: ["sk-live-abcdef"], destination: sink })
    Effect.runSync(
      Effect.logWarning("provider said: Incorrect API key provided: sk-live-abcdef").pipe(
        Effect.annotateLogs({ header: "Bearer sk-live-abcdef" }),
        Effect.provide(layer),
      ),
    )
    expect(out).toContain("Incorrect API key provided: [redacted]")
    expect(out).toContain("Bearer [redacted]")
    expect(out).not.toContain("sk-live-abcdef")
  })

  it("renders a provider API error in a cause as its status, type and size, never its body", () => {
    const marker = "PROMPT-TEXT-1234"
    // the shape of the Stainless SDKs' APIError (headers, the parsed body in `error`, the body in the message)
    class APIError extends Error {
      readonly status = 400
      readonly headers = new Headers({ "request-id": "req_9" })
      readonly requestID = "req_9"
      readonly error = { type: "error", error: { type: "invalid_request_error", message: `echo: ${marker}` } }
      constructor() {
        super(`400 echo: ${marker}`)
        this.name = "BadRequestError"
      }
    }
    let out = ""
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((out += chunk.toString("utf8")), done()) })
    const layer = Logging.layer({ level: "debug", name: "test", secrets: [], destination: sink })
    const wrapped = new Error("count failed", { cause: new APIError() })
    Effect.runSync(
      Effect.all([Effect.logDebug("failed", Cause.fail(new APIError())), Effect.logWarning("died", Cause.die(wrapped))]).pipe(
        Effect.provide(layer),
      ),
    )
    expect(out).not.toContain(marker)
    const lines = out
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { err: string })
    expect(lines).toHaveLength(2)
    expect(lines[0]!.err).toContain("BadRequestError: 400 invalid_request_error (request req_9, ")
    expect(lines[0]!.err).toContain("-char body withheld)")
    expect(lines[1]!.err).toContain("count failed")
    expect(lines[1]!.err).toContain("400 invalid_request_error")
  })
})
