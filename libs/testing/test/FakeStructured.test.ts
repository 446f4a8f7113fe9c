/**
 * The fake's default answer to a request giving an answer schema: the
 * smallest JSON matching it, in all four APIs (an agent CLI's title or
 * routing call parses it); a scripted text still wins, and plain JSON mode
 * keeps the default prose.
 */
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as FakeProvider from "../src/FakeProvider.ts"

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI
let google: GoogleGenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
  google = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: server.url, retryOptions: { attempts: 1 } } })
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const SCHEMA = {
  type: "object",
  properties: {
    title: { type: "string" },
    score: { type: "integer", minimum: 1 },
    kind: { type: "string", enum: ["a", "b"] },
    tags: { type: "array", items: { type: "string" } },
    optional: { type: "string" },
  },
  required: ["title", "score", "kind", "tags"],
  additionalProperties: false,
}
const EXPECTED = { title: "fake", score: 1, kind: "a", tags: [] }

describe("FakeProvider / structured output", () => {
  it("Anthropic output_config.format json_schema", async () => {
    const message = await anthropic.messages.create({
      model: "claude-sonnet-4-6",
      max_tokens: 64,
      messages: [{ role: "user", content: "title this" }],
      output_config: { format: { type: "json_schema", schema: SCHEMA } },
    } as never)
    const block = message.content[0]
    expect(JSON.parse(block?.type === "text" ? block.text : "")).toEqual(EXPECTED)
  })

  it("OpenAI Chat response_format and Responses text.format", async () => {
    const chat = await openai.chat.completions.create({
      model: "gpt-5.6",
      messages: [{ role: "user", content: "title this" }],
      response_format: { type: "json_schema", json_schema: { name: "t", schema: SCHEMA } },
    })
    expect(JSON.parse(chat.choices[0]?.message.content ?? "")).toEqual(EXPECTED)
    const response = await openai.responses.create({
      model: "gpt-5.6",
      input: "title this",
      text: { format: { type: "json_schema", name: "t", schema: SCHEMA } },
    })
    expect(JSON.parse(response.output_text)).toEqual(EXPECTED)
  })

  it("Gemini responseJsonSchema and responseSchema (upper-case types)", async () => {
    const json = await google.models.generateContent({
      model: "gemini-2.5-flash",
      contents: "score this",
      config: { responseMimeType: "application/json", responseJsonSchema: SCHEMA },
    })
    expect(JSON.parse(json.text ?? "")).toEqual(EXPECTED)
    const openapi = await google.models.generateContent({
      model: "gemini-2.5-flash",
      contents: "score this",
      config: {
        responseMimeType: "application/json",
        responseSchema: { type: "OBJECT", properties: { complexity_score: { type: "INTEGER" } }, required: ["complexity_score"] } as never,
      },
    })
    expect(JSON.parse(openapi.text ?? "")).toEqual({ complexity_score: 1 })
  })

  it("a scripted text wins; JSON mode without a schema keeps the default prose", async () => {
    server.control({ replies: [{ text: '{"title":"scripted"}' }] })
    const scripted = await openai.chat.completions.create({
      model: "gpt-5.6",
      messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "t", schema: SCHEMA } },
    })
    expect(scripted.choices[0]?.message.content).toBe('{"title":"scripted"}')
    const plain = await openai.chat.completions.create({
      model: "gpt-5.6",
      messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_object" },
    })
    expect(plain.choices[0]?.message.content).not.toMatch(/^\{/)
  })
})
