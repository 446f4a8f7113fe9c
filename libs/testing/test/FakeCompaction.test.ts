// The fake provider's on-demand compaction (beta compact-2026-09-04), driven through the official SDK:
// the signed block, its usage, and the refusals the SDK maps to its Compaction*Error classes.
import Anthropic, { BadRequestError } from "@anthropic-ai/sdk"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as FakeProvider from "../src/FakeProvider.ts"

const MODEL = "claude-opus-5-5"
const BETA = "compact-2026-09-04"

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const rejection = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise
  } catch (e) {
    return e
  }
  throw new Error("expected the call to fail")
}

const history: Array<Anthropic.Beta.Messages.BetaMessageParam> = [
  { role: "user", content: "I am building a recipe app. Name the main entities." },
  { role: "assistant", content: "Recipe, Ingredient and Step, with a RecipeIngredient for quantities." },
]

const compact = (messages: Array<Anthropic.Beta.Messages.BetaMessageParam>, betas: Array<string> = [BETA]) =>
  anthropic.beta.messages.create({ model: MODEL, max_tokens: 1024, messages, compaction: { type: "summarize" }, betas })

const summary = async () => {
  server.control({ replies: [{ text: "The user builds a recipe app; entities: Recipe, Ingredient, Step." }] })
  const message = await compact(history)
  const block = message.content[0]!
  if (block.type !== "compaction") throw new Error(`expected a compaction block, got ${block.type}`)
  return { message, block }
}

const next = (block: unknown): Array<Anthropic.Beta.Messages.BetaMessageParam> => [
  { role: "assistant", content: [block as Anthropic.Beta.Messages.BetaCompactionBlockParam] },
  { role: "user", content: "Add a Tag entity." },
]

describe("FakeProvider / on-demand compaction", () => {
  it("answers compaction: {type: summarize} with one signed block, stop_reason compaction and the operation's usage", async () => {
    const { message, block } = await summary()
    expect(message.stop_reason).toBe("compaction")
    expect(message.content).toHaveLength(1)
    expect(block.content).toBe("The user builds a recipe app; entities: Recipe, Ingredient, Step.")
    expect(block.signature).toMatch(/^fakecmp1\./)
    expect(typeof block.encrypted_content).toBe("string")
    const iteration = message.usage.iterations?.find((i) => i.type === "compaction")
    expect(iteration?.output_tokens).toBeGreaterThan(0)
    expect(iteration?.input_tokens).toBe(message.usage.input_tokens)
  })

  it("refuses the parameter without a compaction beta", async () => {
    const error = await rejection(compact(history, []))
    expect(error).toBeInstanceOf(BadRequestError)
    expect((error as BadRequestError).message).toContain("requires the beta header")
  })

  it("takes the block back first in messages, verbatim", async () => {
    const { block } = await summary()
    const reply = await anthropic.beta.messages.create({ model: MODEL, max_tokens: 256, messages: next(block), betas: [BETA] })
    expect(reply.stop_reason).toBe("end_turn")
  })

  it("refuses an edited summary, a forged signature and a moved block with the SDK's error classes", async () => {
    const { block } = await summary()
    const send = (messages: Array<Anthropic.Beta.Messages.BetaMessageParam>) =>
      rejection(anthropic.beta.messages.create({ model: MODEL, max_tokens: 256, messages, betas: [BETA] }))
    const edited = await send(next({ ...block, content: `${block.content} And a Tag entity.` }))
    expect(edited).toBeInstanceOf(Anthropic.CompactionContentMismatchError)
    const forged = await send(next({ ...block, signature: "fakecmp1.forged" }))
    expect(forged).toBeInstanceOf(Anthropic.CompactionSignatureInvalidError)
    const moved = await send([
      { role: "user", content: "Hello." },
      { role: "assistant", content: [block as Anthropic.Beta.Messages.BetaCompactionBlockParam] },
      { role: "user", content: "Add a Tag entity." },
    ])
    expect(moved).toBeInstanceOf(Anthropic.CompactionBlockMisplacedError)
    expect((moved as Anthropic.CompactionBlockMisplacedError).errorCode).toBe("compaction_block_misplaced")
  })

  it("refuses a compaction request that ends on an unanswered tool call", async () => {
    const error = await rejection(
      compact([
        { role: "user", content: "Read the parser." },
        { role: "assistant", content: [{ type: "tool_use", id: "tu_1", name: "read_file", input: { path: "parser.ts" } }] },
      ]),
    )
    expect(error).toBeInstanceOf(Anthropic.CompactionIncompleteTurnError)
  })
})
