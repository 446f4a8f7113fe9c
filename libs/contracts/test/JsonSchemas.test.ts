import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { render } from "../src/JsonSchemas.ts"
import * as Requests from "../src/Requests.ts"
import * as Summarize from "../src/Summarize.ts"
import * as Turn from "../src/Turn.ts"

const dir = join(import.meta.dirname, "../../../docs/schemas")

describe("JSON Schema export", () => {
  it("the committed docs/schemas files match the Effect Schemas (run `npm run schemas`)", () => {
    for (const [file, text] of render()) {
      expect(readFileSync(join(dir, file), "utf8"), `docs/schemas/${file} is stale: run npm run schemas`).toBe(text)
    }
  })

  it("documents both request formats and the error codes", () => {
    const request = JSON.parse(render().find(([f]) => f === "turn-request.schema.json")![1])
    expect(Object.keys(request.$defs)).toEqual(expect.arrayContaining(["AnthropicTurnRequest", "OpenAITurnRequest"]))
    const error = render().find(([f]) => f === "error-reply.schema.json")![1]
    for (const code of ["BadRequest", "Conflict", "TooLarge", "Unavailable", "Internal"]) expect(error).toContain(code)
  })

  it("agree with the decoders on unknown fields: accepted (rolling upgrades), so no schema forbids them", () => {
    const turn = {
      turnId: "t1",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-6", fromANewerRelease: 1 },
      messages: [{ role: "user", content: "hi", extra: true }],
      fromANewerRelease: { any: "thing" },
    }
    const summarize = {
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      messages: [{ role: "user", content: "x" }],
      later: 1,
    }
    const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
    expect(Requests.decode(Turn.TurnRequest, bytes(turn), { what: "turn requests" })._tag).toBe("Right")
    expect(Requests.decode(Summarize.SummarizeRequest, bytes(summarize), { what: "summarize requests" })._tag).toBe("Right")
    for (const [file, text] of render()) {
      expect(text.includes('"additionalProperties": false'), `${file} forbids unknown fields the decoders accept`).toBe(false)
    }
  })
})
