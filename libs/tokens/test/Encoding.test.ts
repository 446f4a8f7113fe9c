import { describe, expect, it } from "@effect/vitest"
import { Encoding } from "../src/index.ts"

const of = (name: string, provider = "openai") => Encoding.encodingFor({ provider, name })

describe("Encoding.encodingFor", () => {
  it("uses o200k_base for the current OpenAI families", () => {
    for (const name of [
      "gpt-4o",
      "gpt-4o-mini",
      "gpt-4o-2024-08-06",
      "chatgpt-4o-latest",
      "gpt-4.1",
      "gpt-4.1-nano",
      "gpt-4.5-preview",
      "gpt-5",
      "gpt-5-mini",
      "gpt-5.1",
      "gpt-oss-120b",
      "o1",
      "o1-mini",
      "o3",
      "o3-pro",
      "o4-mini",
      "GPT-4o",
      "openai/gpt-4o",
      "ft:gpt-4o-mini:acme::abc123",
    ]) {
      expect(of(name), name).toBe("o200k_base")
    }
  })

  it("uses cl100k_base for everything else, Claude included", () => {
    for (const name of ["gpt-4", "gpt-4-turbo", "gpt-3.5-turbo", "o10", "gpt-40", "text-embedding-3-small", "llama-3"]) {
      expect(of(name), name).toBe("cl100k_base")
    }
    expect(of("claude-sonnet-4-5", "anthropic")).toBe("cl100k_base")
    expect(of("claude-3-5-haiku-latest", "anthropic")).toBe("cl100k_base")
  })

  it("decides by the model name, not the provider", () => {
    expect(of("gpt-4o", "azure")).toBe("o200k_base")
  })

  it("recognizes encoding names", () => {
    expect(Encoding.encodings.every(Encoding.isEncoding)).toBe(true)
    expect(Encoding.isEncoding("p50k_base")).toBe(false)
  })
})
