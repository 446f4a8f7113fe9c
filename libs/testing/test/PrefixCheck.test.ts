/**
 * The fake provider's prefix check of preserved thinking, through the
 * official Anthropic SDK: a binding model signs its thinking; a later
 * request that changed what preceded a block gets the API's 400, or under
 * `drop_block` (with the beta) the block and every later one dropped and
 * listed in `input_transformations`; an unreadable model's block is dropped
 * silently; older models and foreign signatures are not checked.
 */
import Anthropic from "@anthropic-ai/sdk"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fc from "fast-check"
import { FakeProvider } from "../src/index.ts"

type Json = Record<string, unknown>
const { PrefixCheck } = FakeProvider
const BETA = "thinking-binding-controls-2026-08-01"
const MODEL = "claude-sonnet-5-5"

let server: FakeProvider.FakeProviderServer
let client: Anthropic

beforeAll(async () => {
  server = await FakeProvider.start()
  client = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

const tool = {
  name: "lookup",
  description: "Looks an order up.",
  input_schema: { type: "object" as const, properties: { id: { type: "string" } } },
}
const thinking = { type: "enabled", budget_tokens: 1024 } as const

/** Two tool-use rounds on `model`: the request of the third, with both assistant messages as the API returned them. */
const loop = async (model: string, system = "You are terse."): Promise<{ readonly messages: Array<Json>; readonly system: string }> => {
  const messages: Array<Json> = [{ role: "user", content: "Where are orders 1 and 2?" }]
  for (const id of ["1", "2"]) {
    server.control({ replies: [{ toolCalls: [{ id: `toolu_${id}`, name: "lookup", input: { id } }] }] })
    const reply = await client.messages.create({
      model,
      max_tokens: 2048,
      thinking,
      system,
      tools: [tool],
      messages: messages as never,
    })
    messages.push({ role: "assistant", content: reply.content })
    messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${id}`, content: `order ${id}: shipped` }] })
  }
  return { messages, system }
}

const send = (body: Json, betas: ReadonlyArray<string> = []) =>
  client.beta.messages.create({ max_tokens: 2048, tools: [tool], ...body, betas: [...betas] } as never) as unknown as Promise<Json>

describe("the fake provider's prefix check (preserved thinking)", () => {
  it("signs thinking on a binding model and accepts the conversation sent back unchanged (cache markers moved)", async () => {
    const { messages, system } = await loop(MODEL)
    const first = (messages[1]!["content"] as Array<Json>)[0]!
    expect(first["type"]).toBe("thinking")
    expect(String(first["signature"]).length).toBeGreaterThan(20)
    // a moved breakpoint is no change
    const marked = messages.map((m, i) =>
      i === 2 ? { ...m, content: (m["content"] as Array<Json>).map((b) => ({ ...b, cache_control: { type: "ephemeral" } })) } : m,
    )
    const reply = await send({ model: MODEL, thinking, system, messages: marked }, [BETA])
    expect(reply["input_transformations"]).toEqual([])
  })

  it("answers 400 for a block whose prefix changed, naming the first failing block", async () => {
    const { messages, system } = await loop(MODEL)
    const edited = messages.map((m, i) =>
      i === 2 ? { ...m, content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "[masked]" }] } : m,
    )
    const failure = await send({ model: MODEL, thinking, system, messages: edited }).catch((e: unknown) => e)
    expect(failure).toBeInstanceOf(Anthropic.BadRequestError)
    const error = failure as InstanceType<typeof Anthropic.BadRequestError>
    expect(error.message).toContain(
      "messages.3.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation.",
    )
    expect((error.error as Json)["error"]).toMatchObject({ type: "invalid_request_error" })
    // the system prompt is part of every block's prefix: the first block fails
    const other = await send({ model: MODEL, thinking, system: "You are verbose.", messages }).catch((e: unknown) => e)
    expect(String((other as Error).message)).toContain("messages.1.content.0: Invalid `signature`")
  })

  it("under drop_block (with the beta) drops the failing block and every later one, and lists them", async () => {
    const { messages, system } = await loop(MODEL)
    // the first block left out: the second one's prefix changed (a block between others omitted)
    const omitted = messages.map((m, i) => (i === 1 ? { ...m, content: (m["content"] as Array<Json>).slice(1) } : m))
    const binding = { ...thinking, block_binding: { prefix_mismatch_behavior: "drop_block" } }
    const reply = await send({ model: MODEL, thinking: binding, system, messages: omitted }, [BETA])
    expect(reply["input_transformations"]).toEqual([
      { type: "thinking_dropped", path: "messages.3.content.0", reason: "prefix_binding_mismatch" },
    ])
    // the setting without the beta header is refused
    const refused = await send({ model: MODEL, thinking: binding, system, messages: omitted }).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(Anthropic.BadRequestError)
    expect(String((refused as Error).message)).toContain(`requires the beta header \`anthropic-beta: ${BETA}\``)
  })

  it("drops a block the model cannot read without an error (the model check), and leaves older models unchecked", async () => {
    const { messages, system } = await loop("claude-fable-5-1")
    const reply = await send({ model: "claude-opus-5-5", thinking, system, messages }, [BETA])
    expect(reply["input_transformations"]).toEqual([
      { type: "thinking_dropped", path: "messages.1.content.0", reason: "model_binding_mismatch" },
      { type: "thinking_dropped", path: "messages.3.content.0", reason: "model_binding_mismatch" },
    ])
    // Fable 5.1 reads Opus 5.5's blocks
    const opus = await loop("claude-opus-5-5")
    const read = await send({ model: "claude-fable-5-1", thinking, system: opus.system, messages: opus.messages }, [BETA])
    expect(read["input_transformations"]).toEqual([])
    // an older model produces no bound thinking and checks nothing
    const old = await client.messages.create({
      model: "claude-sonnet-4-6",
      max_tokens: 2048,
      thinking,
      messages: [{ role: "user", content: "hi" }],
    })
    expect(old.content.some((b) => b.type === "thinking")).toBe(false)
  })

  it("streams the signed thinking block the SDK accumulates", async () => {
    const stream = client.messages.stream({ model: MODEL, max_tokens: 2048, thinking, messages: [{ role: "user", content: "hi" }] })
    const final = await stream.finalMessage()
    const block = final.content[0]!
    expect(block.type).toBe("thinking")
    const body: Json = {
      model: MODEL,
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: final.content },
        { role: "user", content: "and?" },
      ],
    }
    expect(PrefixCheck.check(body, []).ok).toBe(true)
  })

  it("property: any change before a signed block fails it and every later block; a change after none", () => {
    const text = fc.string({ minLength: 1, maxLength: 12 })
    fc.assert(
      fc.property(fc.array(text, { minLength: 2, maxLength: 6 }), fc.nat(), text, (turns, at, replacement) => {
        // a conversation of user texts, each answered with a signed thinking block and a text
        const messages: Array<Json> = []
        for (const t of turns) {
          messages.push({ role: "user", content: t })
          const content = PrefixCheck.sign({ model: MODEL, messages }, MODEL, [
            { type: "thinking", thinking: `about ${t}`, signature: "" },
            { type: "text", text: `answer ${t}` },
          ])
          messages.push({ role: "assistant", content })
        }
        messages.push({ role: "user", content: "next" })
        expect(PrefixCheck.check({ model: MODEL, messages }, []).ok).toBe(true)
        const u = 2 * (at % turns.length)
        if (messages[u]!["content"] === replacement) return
        const edited = messages.map((m, i) => (i === u ? { ...m, content: replacement } : m))
        const outcome = PrefixCheck.check(
          { model: MODEL, messages: edited, thinking: { type: "adaptive", block_binding: { prefix_mismatch_behavior: "drop_block" } } },
          [BETA],
        )
        expect(outcome.ok).toBe(true)
        if (!outcome.ok) return
        const expected = turns.map((_t, k) => 2 * k + 1).filter((m) => m > u)
        expect(outcome.dropped.map((d) => d.path)).toEqual(expected.map((m) => `messages.${m}.content.0`))
      }),
    )
  })
})
