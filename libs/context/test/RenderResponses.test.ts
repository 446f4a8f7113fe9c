/**
 * The OpenAI Responses format: decoding `input` items into the neutral model
 * and rendering them back.
 *
 * Round trip (property): canonical Responses input → neutral → render gives
 * the same items. Canonical = the documented normalizations already applied:
 * every message item says `type: "message"`; a content list of exactly one
 * text part is written as a string; item `id`/`status` are absent (ctxd does
 * not keep them); `input_image` carries `detail`; a run of assistant-side
 * items (reasoning, hosted tools' call items, assistant message, function
 * calls) keeps its order, hosted call items verbatim (`id`, `status` included).
 */
import { OpenAIResponses, type Conversation } from "@ctxd/contracts"
import { Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CacheLayout from "../src/CacheLayout.ts"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as RenderResponses from "../src/providers/openai-responses/Render.ts"
import { calls, gpt, input, responsesPairingProblems, result, stored, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const decodeItems = Schema.decodeUnknownSync(Schema.Array(OpenAIResponses.Item))
const decodeTools = Schema.decodeUnknownSync(Schema.Array(OpenAIResponses.Tool))

const render = (
  messages: ReadonlyArray<Conversation.Message>,
  system: ReadonlyArray<Conversation.SystemSection> = [],
  tools: ReadonlyArray<Conversation.Tool> = [],
  model: Models.ResolvedModel = gpt,
) => RenderResponses.render({ tenant: "acme", session: "s1", model, system, tools, messages })

const word = fc.stringMatching(/^[a-z]{1,8}( [a-z]{1,8}){0,3}$/)

/** One exchange in canonical form: a user message, then optionally reasoning, text and calls with their outputs. */
const exchange = (n: number) =>
  fc
    .record({
      user: fc.oneof(word, fc.tuple(word, fc.constantFrom("low", "high", "auto"))),
      pinned: fc.option(fc.tuple(fc.constantFrom("system", "developer"), word), { nil: undefined }),
      reasoning: fc.option(fc.tuple(word, fc.base64String({ minLength: 4, maxLength: 40 })), { nil: undefined }),
      hosted: fc.option(fc.tuple(fc.constantFrom("web_search_call", "mcp_call"), word), { nil: undefined }),
      text: fc.option(word, { nil: undefined }),
      calls: fc.array(fc.tuple(fc.constantFrom("lookup", "book_flight", "get_user", "apply_patch"), word, word), { maxLength: 3 }),
    })
    .map((e): Array<Json> => {
      const items: Array<Json> = []
      if (e.pinned !== undefined) items.push({ type: "message", role: e.pinned[0], content: e.pinned[1] })
      items.push(
        typeof e.user === "string"
          ? { type: "message", role: "user", content: e.user }
          : {
              type: "message",
              role: "user",
              content: [
                { type: "input_text", text: e.user[0] },
                { type: "input_image", image_url: `https://example.com/${n}.png`, detail: e.user[1] },
              ],
            },
      )
      if (e.reasoning !== undefined) {
        // store: false bodies carry reasoning by its encrypted_content (see the test below for one without)
        const r: Json = {
          type: "reasoning",
          id: `rs_${n}`,
          summary: [{ type: "summary_text", text: e.reasoning[0] }],
          encrypted_content: e.reasoning[1],
        }
        items.push(r)
      }
      if (e.hosted !== undefined) {
        const [type, q] = e.hosted
        items.push(
          type === "web_search_call"
            ? { type, id: `ws_${n}`, status: "completed", action: { type: "search", query: q } }
            : { type, id: `mcp_${n}`, server_label: "docs", name: "search", arguments: JSON.stringify({ q }), output: q },
        )
      }
      if (e.text !== undefined || (e.reasoning !== undefined && e.calls.length === 0)) {
        items.push({ type: "message", role: "assistant", content: e.text ?? "ok" })
      }
      // apply_patch stands for a custom (free-form input) tool
      e.calls.forEach(([name, q], k) =>
        items.push(
          name === "apply_patch"
            ? { type: "custom_tool_call", call_id: `call_${n}_${k}`, name, input: `*** patch ${q}` }
            : { type: "function_call", call_id: `call_${n}_${k}`, name, arguments: JSON.stringify({ q }) },
        ),
      )
      e.calls.forEach(([name, , out], k) =>
        items.push({
          type: name === "apply_patch" ? "custom_tool_call_output" : "function_call_output",
          call_id: `call_${n}_${k}`,
          output: out,
        }),
      )
      return items
    })

const conversation = fc
  .integer({ min: 1, max: 6 })
  .chain((k) => fc.tuple(...Array.from({ length: k }, (_, n) => exchange(n))))
  .map((xs) => xs.flat())

describe("Responses input → neutral → render", () => {
  it("round-trips canonical input items exactly", () => {
    fc.assert(
      fc.property(conversation, (items) => {
        const messages = Normalize.fromResponses(decodeItems(items))
        const { body } = render(messages)
        expect(body["input"]).toEqual(items)
        expect(responsesPairingProblems(body)).toEqual([])
      }),
      { numRuns: 300 },
    )
  })

  it("groups a run of reasoning, assistant text and calls into one assistant message, and outputs into one tool message", () => {
    const messages = Normalize.fromResponsesIndexed(
      decodeItems([
        { role: "user", content: [{ type: "input_text", text: "hi" }] },
        { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAA==" },
        { type: "function_call", call_id: "c1", name: "a", arguments: '{"x":1}', id: "fc_1", status: "completed" },
        { type: "function_call", call_id: "c2", name: "b", arguments: "not json" },
        { type: "function_call_output", call_id: "c1", output: "one" },
        {
          type: "function_call_output",
          call_id: "c2",
          output: [
            { type: "input_text", text: "two" },
            { type: "input_file", file_id: "f" },
          ],
        },
        { type: "message", role: "developer", content: "be brief" },
      ]),
    )
    expect(messages.map((m) => [m.message.role, m.sourceIndex])).toEqual([
      ["user", 0],
      ["assistant", 1],
      ["tool", 4],
      ["system", 6],
    ])
    expect(messages[1]!.message.parts).toEqual([
      { type: "opaque", format: "openai-responses", block: { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAA==" } },
      { type: "tool_call", id: "c1", name: "a", input: { x: 1 }, arguments: '{"x":1}' },
      { type: "tool_call", id: "c2", name: "b", input: {}, arguments: "not json" },
    ])
    expect(messages[2]!.message.parts[1]).toEqual({
      type: "tool_result",
      callId: "c2",
      content: [
        { type: "text", text: "two" },
        { type: "text", text: "[openai-responses input_file block omitted]" },
      ],
      isError: false,
    })
    expect(messages[3]!.message).toEqual({ role: "system", parts: [{ type: "text", text: "be brief" }], developer: true })
  })

  it("renders instructions, store: false, max_output_tokens, prompt_cache_key, function and hosted tools", () => {
    const tools = Normalize.tools(
      "openai-responses",
      decodeTools([
        { type: "web_search", search_context_size: "low" },
        { type: "function", name: "zeta", description: "z", parameters: { type: "object", properties: {} }, strict: true },
        { type: "function", name: "alpha" },
      ]),
    )
    const { body, promptCacheKey } = render(
      [user("hi")],
      [
        { id: "a", text: "A", cache: "5m" },
        { id: "instructions", text: "B", cache: "5m" },
      ],
      tools,
    )
    expect(body).toEqual({
      model: "gpt-4o",
      instructions: "A\n\nB",
      input: [{ type: "message", role: "user", content: "hi" }],
      tools: [
        { type: "function", name: "alpha", parameters: { type: "object", properties: {} } },
        { type: "web_search", search_context_size: "low" },
        { type: "function", name: "zeta", description: "z", parameters: { type: "object", properties: {} }, strict: true },
      ],
      prompt_cache_key: CacheLayout.promptCacheKey("acme", "s1"),
      store: false,
      max_output_tokens: gpt.maxOutputTokens,
    })
    expect(promptCacheKey).toBe(body["prompt_cache_key"])
  })

  it("keeps a custom tool under its own name and sends it back as it came", () => {
    const tools = Normalize.tools("openai-responses", decodeTools([{ type: "custom", name: "apply_patch", description: "patch files" }]))
    expect(tools.map((t) => t.name)).toEqual(["apply_patch"])
    expect(render([user("hi")], [], tools).body["tools"]).toEqual([{ type: "custom", name: "apply_patch", description: "patch files" }])
  })

  it("asks for 24h retention only for models whose price row has the 24h tier", () => {
    const gpt41 = Models.resolve({ provider: "openai", name: "gpt-4.1" })
    expect(render([user("hi")], [], [], gpt41).body["prompt_cache_retention"]).toBe("24h")
    expect(render([user("hi")]).body["prompt_cache_retention"]).toBeUndefined()
  })

  it("keeps a reasoning item with the call after it through the pipeline, and masks old outputs as function_call_output", () => {
    const reasoning: Conversation.Part = {
      type: "opaque",
      format: "openai-responses",
      block: { type: "reasoning", summary: [], encrypted_content: "enc" },
    }
    const history: Array<Conversation.Message> = [user("first request")]
    for (let i = 0; i < 8; i++) {
      history.push({ role: "assistant", parts: [reasoning, ...calls(`c${i}`).parts] })
      history.push({ role: "tool", parts: [result(`c${i}`, `result ${i} `.repeat(60))] })
    }
    history.push(user("next"))
    const out = Pipeline.run(
      input(stored(history, 200), { format: "openai-responses", options: Pipeline.resolveOptions({ maskKeep: 2, maskBatchTokens: 300 }) }),
    )
    const items = out.request["input"] as Array<Json>
    expect(responsesPairingProblems(out.request)).toEqual([])
    for (const [i, item] of items.entries()) {
      if (item["type"] === "function_call") expect(items[i - 1]!["type"]).toBe("reasoning")
    }
    expect(out.report.masking?.masked).toBeGreaterThan(0)
    const outputs = items.filter((x) => x["type"] === "function_call_output").map((x) => String(x["output"]))
    expect(outputs.some((o) => o.startsWith("[lookup:"))).toBe(true)
    expect(outputs.at(-1)).toContain("result 7")
  })

  it("drops a reasoning item without encrypted_content (under store: false the API would look its id up: 404)", () => {
    const bare: Conversation.Part = { type: "opaque", format: "openai-responses", block: { type: "reasoning", id: "rs_1", summary: [] } }
    const history: Array<Conversation.Message> = [
      user("go"),
      { role: "assistant", parts: [bare, ...calls("c1").parts] },
      { role: "tool", parts: [{ type: "tool_result", callId: "c1", content: [], isError: false }] },
    ]
    const { body } = render(history)
    expect((body["input"] as Array<Json>).map((i) => i["type"])).toEqual(["message", "function_call", "function_call_output"])
  })

  it("drops a reasoning item whose call was removed as an orphan (the API wants its following item)", () => {
    const reasoning: Conversation.Part = {
      type: "opaque",
      format: "openai-responses",
      block: { type: "reasoning", summary: [], encrypted_content: "enc" },
    }
    const history: Array<Conversation.Message> = [
      user("go"),
      { role: "assistant", parts: [reasoning, ...calls("c1").parts] },
      user("again"),
    ]
    const out = Pipeline.run(input(stored(history), { format: "openai-responses" }))
    expect(out.report.orphans.calls).toBe(1)
    expect(out.request["input"]).toEqual([
      { type: "message", role: "user", content: "go" },
      { type: "message", role: "user", content: "again" },
    ])
    expect(responsesPairingProblems(out.request)).toEqual([])
  })

  it("renders tool results with images as parts, errors prefixed, other formats' opaque parts as notes", () => {
    const { body } = render([
      user("go"),
      {
        role: "assistant",
        parts: [{ type: "opaque", format: "anthropic", block: { type: "thinking", thinking: "x" } }, ...calls("c1").parts],
      },
      {
        role: "tool",
        parts: [
          {
            type: "tool_result",
            callId: "c1",
            isError: true,
            content: [
              { type: "text", text: "bad" },
              { type: "image", source: { kind: "url", url: "u" } },
            ],
          },
        ],
      },
    ])
    expect(body["input"]).toEqual([
      { type: "message", role: "user", content: "go" },
      { type: "function_call", call_id: "c1", name: "lookup", arguments: '{"q":"c1"}' },
      {
        type: "function_call_output",
        call_id: "c1",
        output: [
          { type: "input_text", text: "[error] bad" },
          { type: "input_image", image_url: "u", detail: "auto" },
        ],
      },
    ])
  })
})
