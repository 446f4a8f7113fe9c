// The log scrubber: the secret values of the environment (API keys, NATS
// password, token and seed, passwords inside DATABASE_URL and NATS_URL) are
// replaced in every line, raw or JSON-escaped, whatever echoed them.
import { Effect } from "effect"
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
})
