import { Either } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as CostModel from "../src/CostModel.ts"
import * as PriceFile from "../src/PriceFile.ts"

const ok = (input: unknown): CostModel.PriceTable => {
  const decoded = PriceFile.decode(input)
  if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
  return decoded.right
}
const bad = (input: unknown): PriceFile.InvalidPriceFile => {
  const decoded = PriceFile.decode(input)
  if (Either.isRight(decoded)) throw new Error(`expected a problem with ${JSON.stringify(input)}`)
  return decoded.left
}

describe("PriceFile.decode: good files", () => {
  it("takes full and partial rows and builds the table with them first", () => {
    const prices = ok({
      models: [
        { match: "claude-sonnet-4-5", inputPerMtok: 2.4, outputPerMtok: 12 },
        {
          match: "my-llama*",
          provider: "openai",
          family: "llama",
          inputPerMtok: 0,
          outputPerMtok: 0,
          cacheReadMultiplier: 0.25,
          tiers: [{ name: "in_memory", ttlSeconds: 600, writeMultiplier: 1, maxLifetimeSeconds: 3600 }],
          minCacheableTokens: 1024,
          mechanism: "automatic",
          incrementTokens: 128,
          maxBreakpoints: 0,
          lookbackBlocks: 0,
        },
      ],
    })
    expect(prices.rows).toHaveLength(2)
    expect(prices.lookup("claude-sonnet-4-5")).toEqual({ ...CostModel.lookup("claude-sonnet-4-5"), inputPerMtok: 2.4, outputPerMtok: 12 })
    expect(prices.lookup("my-llama-3-70b")).toMatchObject({ family: "llama", mechanism: "automatic", incrementTokens: 128 })
    expect(prices.lookup("gpt-4o")).toEqual(CostModel.lookup("gpt-4o"))
  })

  it("an empty list is the built-in table", () => {
    expect(ok({ models: [] }).lookup("claude-sonnet-4-5")).toEqual(CostModel.lookup("claude-sonnet-4-5"))
  })

  it("takes the example of docs/cache-and-economics.md (section Prices)", () => {
    const page = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "cache-and-economics.md"), "utf8")
    const section = page.slice(page.indexOf("\n## Prices\n"))
    const example = section.slice(section.indexOf("```json\n") + 8, section.indexOf("\n```", section.indexOf("```json")))
    const prices = Either.getOrThrow(PriceFile.fromJson(example))
    expect(prices.rows.map((r) => r.match)).toEqual(["claude-sonnet-4-5", "gpt-4o*", "my-llama"])
    expect(prices.lookup("claude-sonnet-4-5").inputPerMtok).toBe(2.4)
    expect(CostModel.tier(prices.lookup("gpt-4o-mini")).ttlSeconds).toBe(600)
    expect(prices.lookup("my-llama-3.1-70b")).toMatchObject({ provider: "openai", mechanism: "automatic", minCacheableTokens: 1024 })
    expect(prices.lookup("my-llama-3.1-70b")).toMatchObject({ contextWindow: 131_072, maxOutputTokens: 8_192, known: true })
    expect(prices.lookup("my-llama-3.1-70b").capabilities.toolSearch).toBe(false)
  })

  it("reads JSON text", () => {
    const decoded = PriceFile.fromJson(`{"models": [{"match": "gpt-4o*", "cacheReadMultiplier": 0.25}]}`)
    expect(Either.getOrThrow(decoded).lookup("gpt-4o-mini").cacheReadMultiplier).toBe(0.25)
  })
})

describe("PriceFile.decode: bad files name the row and the field", () => {
  it("a bad value: row index, match and field in the message and in the problem", () => {
    const error = bad({
      models: [
        { match: "gpt-4o", inputPerMtok: 1 },
        { match: "claude-sonnet", cacheReadMultiplier: 0 },
      ],
    })
    expect(error._tag).toBe("InvalidPriceFile")
    expect(error.problems).toEqual([{ row: 1, field: "cacheReadMultiplier", message: "Expected a positive number, actual 0" }])
    expect(error.message).toBe('models[1] (match "claude-sonnet"), field cacheReadMultiplier: Expected a positive number, actual 0')
  })

  it("checks every rule, and lists every problem at once", () => {
    const error = bad({
      models: [
        {
          match: "a",
          inputPerMtok: -1,
          outputPerMtok: "3",
          tiers: [{ name: "5m", ttlSeconds: 0.5, writeMultiplier: 0 }],
          minCacheableTokens: 1.5,
          incrementTokens: 0,
          maxBreakpoints: -1,
          provider: "mistral",
          mechanism: "implicit",
        },
      ],
    })
    const byField = Object.fromEntries(error.problems.map((p) => [p.field, p.message]))
    expect(error.problems.every((p) => p.row === 0)).toBe(true)
    expect(byField).toEqual({
      inputPerMtok: "Expected a non-negative number, actual -1",
      outputPerMtok: 'Expected number, actual "3"',
      "tiers[0].ttlSeconds": "Expected an integer, actual 0.5",
      "tiers[0].writeMultiplier": "Expected a positive number, actual 0",
      minCacheableTokens: "Expected an integer, actual 1.5",
      incrementTokens: "Expected a number greater than or equal to 1, actual 0",
      maxBreakpoints: "Expected a non-negative number, actual -1",
      provider: 'Expected one of "anthropic", "openai", "gemini", "unknown", actual "mistral"',
      mechanism: 'Expected one of "explicit", "automatic", actual "implicit"',
    })
    expect(error.message).toContain('models[0] (match "a"), field tiers[0].ttlSeconds: Expected an integer, actual 0.5')
  })

  it("ttlSeconds ≥ 1, tiers not empty and with unique names", () => {
    expect(bad({ models: [{ match: "a", tiers: [{ name: "x", ttlSeconds: 0, writeMultiplier: 1 }] }] }).problems).toEqual([
      { row: 0, field: "tiers[0].ttlSeconds", message: "Expected a number greater than or equal to 1, actual 0" },
    ])
    expect(bad({ models: [{ match: "a", tiers: [] }] }).problems).toEqual([
      { row: 0, field: "tiers", message: "Expected an array of at least 1 item(s), actual []" },
    ])
    const twice = { name: "5m", ttlSeconds: 300, writeMultiplier: 1.25 }
    expect(bad({ models: [{ match: "a", tiers: [twice, twice] }] }).problems).toEqual([
      { row: 0, field: "tiers", message: "tier names must be unique" },
    ])
  })

  it("a misspelt or missing field, a non-row, a * inside the match", () => {
    const error = bad({ models: [{ match: "a", inputPerMTok: 2 }, { inputPerMtok: 2 }, 7, { match: "claude-*-4" }] })
    expect(error.problems).toEqual([
      {
        row: 0,
        field: "inputPerMTok",
        message: expect.stringMatching(/^is unexpected, expected: "match" \| "provider" \| .*"inputPerMtok"/),
      },
      { row: 1, field: "match", message: "is missing" },
      { row: 2, field: undefined, message: 'Expected a row object {"match", ...price fields}, actual 7' },
      { row: 3, field: "match", message: "only a trailing * is allowed (the match is a name prefix)" },
    ])
    expect(error.message).toContain('models[0] (match "a"), field inputPerMTok: is unexpected')
    expect(error.message).toContain("models[1], field match: is missing")
    expect(error.message).toContain('models[3] (match "claude-*-4"), field match: only a trailing *')
  })

  it("a row an earlier row hides is an error, not a silent no-op", () => {
    const error = bad({
      models: [
        { match: "claude-sonnet*", inputPerMtok: 2 },
        { match: "Claude-Sonnet-4-5", inputPerMtok: 1 },
      ],
    })
    expect(error.problems).toEqual([
      { row: 1, field: "match", message: expect.stringContaining('never used: models[0] (match "claude-sonnet*") comes first') },
    ])
  })

  it("the file's shape: an object with models and nothing else; JSON syntax", () => {
    expect(bad([]).message).toBe('Expected an object {"models": [rows]}, actual []')
    expect(bad({}).problems).toEqual([{ field: "models", message: "is missing" }])
    expect(bad({ models: {} }).problems).toEqual([{ field: "models", message: "Expected an array of rows, actual {}" }])
    expect(bad({ models: [], version: 2 }).problems).toEqual([{ field: "version", message: 'is unexpected, expected: "models"' }])
    const syntax = PriceFile.fromJson("{ models: [] }")
    expect(Either.isLeft(syntax) && syntax.left.message).toMatch(/^not JSON: /)
  })
})
