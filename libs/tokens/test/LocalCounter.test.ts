import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { LocalCounter } from "../src/index.ts"
import * as Bpe from "../src/internal/bpe.ts"

const { overhead } = LocalCounter

const text = (t: string): Conversation.TextPart => ({ type: "text", text: t })
const user = (...parts: Array<Conversation.Part>): Conversation.Message => ({ role: "user", parts })

describe("LocalCounter (tiktoken)", () => {
  it("counts known samples like the reference tokenizer", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    expect(counter.backend).toBe("tiktoken")
    expect(counter.exact).toBe(false)
    expect(counter.countText("hello world", "cl100k_base")).toBe(2)
    expect(counter.countText("hello world", "o200k_base")).toBe(2)
    expect(counter.countText("The quick brown fox jumps over the lazy dog.", "cl100k_base")).toBe(10)
    expect(counter.countText('{"city":"Paris"}', "o200k_base")).toBe(5)
    expect(counter.countText("", "o200k_base")).toBe(0)
  })

  it("treats special-token text as ordinary text instead of throwing", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    expect(counter.countText("<|endoftext|>", "cl100k_base")).toBe(7)
  })

  it("answers a repeated segment from the cache without tokenizing again", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    const first = counter.countText("some tool output that is worth caching", "o200k_base")
    expect(counter.stats()).toEqual({ hits: 0, misses: 1, size: 1 })
    expect(counter.countText("some tool output that is worth caching", "o200k_base")).toBe(first)
    expect(counter.stats()).toEqual({ hits: 1, misses: 1, size: 1 })
    // the same text under another encoding is another segment
    counter.countText("some tool output that is worth caching", "cl100k_base")
    expect(counter.stats()).toEqual({ hits: 1, misses: 2, size: 2 })
  })

  it("keeps at most cacheCapacity segments, evicting the least recently used", () => {
    const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 3 })
    for (const t of ["one", "two", "three"]) counter.countText(t, "cl100k_base")
    counter.countText("one", "cl100k_base") // refresh: "two" is now the oldest
    counter.countText("four", "cl100k_base") // evicts "two"
    expect(counter.stats()).toEqual({ hits: 1, misses: 4, size: 3 })
    counter.countText("one", "cl100k_base")
    counter.countText("three", "cl100k_base")
    expect(counter.stats().hits).toBe(3)
    counter.countText("two", "cl100k_base")
    expect(counter.stats()).toEqual({ hits: 3, misses: 5, size: 3 })
    for (let i = 0; i < 100; i++) counter.countText(`text ${i}`, "cl100k_base")
    expect(counter.stats().size).toBe(3)
  })

  it("counts a message as its parts plus framing", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    expect(counter.countMessage(user(text("hello world")), "cl100k_base")).toBe(overhead.message + 2)
    expect(counter.countMessage({ role: "user", name: "alice", parts: [text("hello world")] }, "cl100k_base")).toBe(
      overhead.message + overhead.name + 1 + 2,
    )
    const image: Conversation.ImagePart = { type: "image", source: { kind: "url", url: "https://x/y.png" } }
    expect(counter.countMessage(user(image), "o200k_base")).toBe(overhead.message + overhead.image)
    expect(counter.countMessage(user({ ...image, detail: "low" }), "o200k_base")).toBe(overhead.message + overhead.imageLow)
  })

  it("counts tool calls by name and arguments, tool results by content", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    const call: Conversation.Message = {
      role: "assistant",
      parts: [{ type: "tool_call", id: "call_1", name: "get_weather", input: { city: "Paris" } }],
    }
    expect(counter.countMessage(call, "o200k_base")).toBe(overhead.message + overhead.toolCall + 2 + 5)
    const raw: Conversation.Message = {
      role: "assistant",
      parts: [{ type: "tool_call", id: "call_1", name: "get_weather", input: {}, arguments: '{"city":"Paris"}' }],
    }
    expect(counter.countMessage(raw, "o200k_base")).toBe(overhead.message + overhead.toolCall + 2 + 5)
    const result: Conversation.Message = {
      role: "tool",
      parts: [{ type: "tool_result", callId: "call_1", isError: false, content: [text("hello world")] }],
    }
    expect(counter.countMessage(result, "o200k_base")).toBe(overhead.message + overhead.toolResult + 2)
    const opaque: Conversation.Message = {
      role: "assistant",
      parts: [{ type: "opaque", format: "anthropic", block: { city: "Paris" } }],
    }
    expect(counter.countMessage(opaque, "o200k_base")).toBe(overhead.message + 5)
  })

  it("only tokenizes the new segments of a turn and remembers message objects", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    const a = user(text("first question"))
    counter.countMessage(a, "o200k_base")
    const misses = counter.stats().misses
    // same content in a new object: segment cache hit
    counter.countMessage(user(text("first question")), "o200k_base")
    expect(counter.stats().misses).toBe(misses)
    // same object: remembered, no segment lookup at all
    const before = counter.stats().hits
    counter.countMessage(a, "o200k_base")
    expect(counter.stats().hits).toBe(before + 1)
    // a new message with one old and one new part: one miss
    counter.countMessage(user(text("first question"), text("a follow-up")), "o200k_base")
    expect(counter.stats().misses).toBe(misses + 1)
  })

  it("counts the system prompt by sections", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    expect(counter.countSystem([], "cl100k_base")).toBe(0)
    const sections: Array<Conversation.SystemSection> = [
      { id: "a", text: "hello world", cache: "1h" },
      { id: "b", text: "hello world", cache: "none" },
    ]
    expect(counter.countSystem(sections, "cl100k_base")).toBe(overhead.system + overhead.systemSection + 4)
  })

  it("counts tools per definition so a stable tool list hits the cache", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    expect(counter.countTools([], "o200k_base")).toBe(0)
    const tools = (): Array<Conversation.Tool> => [
      {
        name: "get_weather",
        description: "Weather for a city",
        inputSchema: { type: "object", properties: { city: { type: "string" } } },
      },
      { name: "search", inputSchema: { type: "object", properties: { q: { type: "string" } } } },
    ]
    const n = counter.countTools(tools(), "o200k_base")
    const single = (tool: Conversation.Tool) =>
      counter.countText(JSON.stringify({ name: tool.name, description: tool.description, input_schema: tool.inputSchema }), "o200k_base")
    expect(n).toBe(overhead.tools + 2 * overhead.tool + single(tools()[0]!) + single(tools()[1]!))
    const { misses } = counter.stats()
    expect(counter.countTools(tools(), "o200k_base")).toBe(n)
    expect(counter.stats().misses).toBe(misses)
  })

  it("remembers system sections and tools by identity: recounting the same objects neither hashes nor tokenizes, even after the segment cache evicted them", () => {
    // a segment cache of 1: without the identity memo every recount of two texts would miss
    const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 1 })
    const tools: Array<Conversation.Tool> = [
      { name: "a", description: "first tool", inputSchema: { type: "object" } },
      { name: "b", description: "second tool", inputSchema: { type: "object" } },
    ]
    const sections: Array<Conversation.SystemSection> = [
      { id: "x", text: "be brief", cache: "5m" },
      { id: "y", text: "be kind", cache: "5m" },
    ]
    const n = counter.countTools(tools, "o200k_base")
    const s = counter.countSystem(sections, "o200k_base")
    const { misses } = counter.stats()
    expect(misses).toBe(4)
    expect(counter.countTools([...tools], "o200k_base")).toBe(n)
    expect(counter.countSystem([sections[0]!, sections[1]!], "o200k_base")).toBe(s)
    expect(counter.stats().misses).toBe(misses)
    // equal content in new objects is counted again (from the text, here a miss)
    expect(counter.countTools([{ ...tools[0]! }], "o200k_base")).toBe(counter.countTools([tools[0]!], "o200k_base"))
    expect(counter.stats().misses).toBe(misses + 1)
  })

  it("cuts long runs so pathological text stays close to the exact count (at most ~1 token per cut)", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    for (const sample of ["a".repeat(1_000), "=".repeat(1_000), " ".repeat(1_000), "ACGT".repeat(250), "é".repeat(700)]) {
      const exact = Bpe.tokenizer("o200k_base").encode(sample, [], []).length
      const counted = counter.countText(sample, "o200k_base")
      const cuts = Math.ceil(sample.length / Bpe.MAX_RUN)
      expect(Math.abs(counted - exact), JSON.stringify(sample.slice(0, 8))).toBeLessThanOrEqual(cuts + 1)
    }
    // mixed with ordinary text: the ordinary part is counted exactly
    const prose = "The quick brown fox jumps over the lazy dog. "
    expect(counter.countText(prose + "-".repeat(128), "cl100k_base")).toBeGreaterThan(counter.countText(prose, "cl100k_base"))
  })

  it("counts huge texts without a space (guarded; the test timeout is the bound)", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    const letters = Array.from({ length: 200_000 }, (_, i) => String.fromCharCode(97 + ((i * 7) % 26))).join("")
    const n = counter.countText(letters, "o200k_base")
    expect(n).toBeGreaterThan(200_000 / 8)
    expect(n).toBeLessThan(200_000)
    expect(counter.countText("x".repeat(1_000_000), "cl100k_base")).toBeGreaterThan(1_000_000 / 16)
  })

  it("does not split surrogate pairs", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    const emoji = "😀".repeat(200)
    expect(counter.countText(emoji, "o200k_base")).toBeGreaterThan(0)
  })
})

describe("LocalCounter (heuristic)", () => {
  it("counts ceil(characters / 4) and always picks the heuristic encoding", () => {
    const counter = LocalCounter.make({ backend: "heuristic" })
    expect(counter.encodingFor({ provider: "openai", name: "gpt-4o" })).toBe("heuristic")
    expect(counter.countText("hello world", "heuristic")).toBe(3)
    expect(counter.countText("abcd", "o200k_base")).toBe(1)
    expect(counter.countText("", "heuristic")).toBe(0)
    expect(counter.countMessage(user(text("hello world")), "heuristic")).toBe(overhead.message + 3)
    expect(counter.stats()).toEqual({ hits: 0, misses: 0, size: 0 })
  })

  it("is used by the tiktoken backend for the heuristic encoding", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    expect(counter.encodingFor({ provider: "anthropic", name: "claude-opus-4-1" })).toBe("cl100k_base")
    expect(counter.countText("hello world", "heuristic")).toBe(3)
  })
})

describe("LocalCounter layers", () => {
  layer(LocalCounter.layerHeuristic)("layerHeuristic", (it) => {
    it.effect("provides the heuristic counter", () =>
      Effect.gen(function* () {
        const counter = yield* LocalCounter.LocalCounter
        expect(counter.backend).toBe("heuristic")
      }),
    )
  })

  const withEnv = (env: Record<string, string>) =>
    LocalCounter.layerConfig.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))

  it.effect("layerConfig defaults to tiktoken", () =>
    Effect.gen(function* () {
      const counter = yield* LocalCounter.LocalCounter
      expect(counter.backend).toBe("tiktoken")
    }).pipe(Effect.provide(withEnv({}))),
  )

  it.effect("layerConfig reads CTXD_TOKENIZER and CTXD_TOKEN_CACHE_SIZE", () =>
    Effect.gen(function* () {
      const counter = yield* LocalCounter.LocalCounter
      expect(counter.backend).toBe("tiktoken")
      for (const t of ["a", "b", "c"]) counter.countText(t, "cl100k_base")
      expect(counter.stats().size).toBe(2)
    }).pipe(Effect.provide(withEnv({ CTXD_TOKENIZER: "tiktoken", CTXD_TOKEN_CACHE_SIZE: "2" }))),
  )

  it.effect("layerConfig rejects an unknown backend", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(LocalCounter.LocalCounter.pipe(Effect.provide(withEnv({ CTXD_TOKENIZER: "bert" }))))
      expect(String(error)).toContain("CTXD_TOKENIZER")
    }),
  )

  it.effect("layerTiktoken can preload a vocabulary", () =>
    Effect.gen(function* () {
      const counter = yield* LocalCounter.LocalCounter
      expect(counter.countText("hello world", "o200k_base")).toBe(2)
    }).pipe(Effect.provide(LocalCounter.layerTiktoken({ preload: ["o200k_base"], cacheCapacity: 8 }))),
  )
})
