import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { render } from "../src/JsonSchemas.ts"

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
})
