/**
 * The Gemini format: decoding `contents` into the neutral model and rendering
 * them back.
 *
 * Round trip (property): canonical Gemini contents → neutral → render gives
 * the same contents. Canonical = the documented normalizations already
 * applied: every content says its role; roles alternate; a function response
 * content carries only the responses to the calls just before it, in call
 * order, and carries an `id` exactly when its call does; responses are
 * `{output: text}` (a text that is not a JSON object's), `{error: text}` or
 * another object; function calls carry `args`.
 */
import { Gemini, type Conversation } from "@ctxd/contracts"
import { Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import * as RenderGemini from "../src/providers/gemini/Render.ts"
import * as RenderOpenAI from "../src/providers/openai-chat/Render.ts"
import * as RenderResponses from "../src/providers/openai-responses/Render.ts"
import * as ValidateGemini from "../src/providers/gemini/Validate.ts"
import { call, calls, claude, geminiPairingProblems, gpt, input, result, stored, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const decodeContents = Schema.decodeUnknownSync(Schema.Array(Gemini.Content))
const decodeTools = Schema.decodeUnknownSync(Schema.Array(Gemini.Tool))

const flash = Models.resolve({ provider: "google", name: "gemini-2.5-flash" })
const pro3 = Models.resolve({ provider: "google", name: "gemini-3-pro-preview" })

const render = (
  messages: ReadonlyArray<Conversation.Message>,
  system: ReadonlyArray<Conversation.SystemSection> = [],
  tools: ReadonlyArray<Conversation.Tool> = [],
  model: Models.ResolvedModel = flash,
) => RenderGemini.render({ model, system, tools, messages }).body as Json & { contents: Array<Json>; config: Json }

const word = fc.stringMatching(/^[a-z]{1,8}( [a-z]{1,8}){0,3}$/)
const signature = fc.base64String({ minLength: 4, maxLength: 24 }).filter((s) => s.length > 0)
const NAMES = ["lookup", "book_flight", "get_user"] as const

/** One exchange in canonical form: a user content, a model content, and the responses to its calls. */
const exchange = (n: number) =>
  fc
    .record({
      user: fc.oneof(
        word,
        fc.tuple(
          word,
          fc.base64String({ minLength: 4, maxLength: 12 }).filter((s) => s.length > 0),
        ),
      ),
      thought: fc.option(word, { nil: undefined }),
      text: fc.option(fc.tuple(word, fc.option(signature, { nil: undefined })), { nil: undefined }),
      calls: fc.array(
        fc.record({
          name: fc.constantFrom(...NAMES),
          arg: word,
          id: fc.boolean(),
          signature: fc.option(signature, { nil: undefined }),
          response: fc.oneof(
            word.map((w): Json => ({ output: w })),
            word.map((w): Json => ({ error: w })),
            fc.integer({ min: 0, max: 99 }).map((k): Json => ({ result: k, ok: true })),
          ),
        }),
        { maxLength: 3 },
      ),
      trailing: fc.option(signature, { nil: undefined }),
    })
    .map((e): Array<Json> => {
      const out: Array<Json> = [
        {
          role: "user",
          parts:
            typeof e.user === "string"
              ? [{ text: e.user }]
              : [{ text: e.user[0] }, { inlineData: { mimeType: "image/png", data: e.user[1] } }],
        },
      ]
      const model: Array<Json> = []
      if (e.thought !== undefined) model.push({ text: e.thought, thought: true })
      if (e.text !== undefined) model.push(e.text[1] === undefined ? { text: e.text[0] } : { text: e.text[0], thoughtSignature: e.text[1] })
      e.calls.forEach((c, k) => {
        const fc: Json = { name: c.name, args: { q: c.arg } }
        if (c.id) fc["id"] = `call_${n}_${k}`
        model.push(c.signature === undefined ? { functionCall: fc } : { functionCall: fc, thoughtSignature: c.signature })
      })
      if (e.trailing !== undefined && e.calls.length === 0) model.push({ text: "", thoughtSignature: e.trailing })
      if (model.length === 0) model.push({ text: "ok" })
      out.push({ role: "model", parts: model })
      if (e.calls.length > 0) {
        out.push({
          role: "user",
          parts: e.calls.map((c, k) => {
            const fr: Json = { name: c.name, response: c.response }
            if (c.id) fr["id"] = `call_${n}_${k}`
            return { functionResponse: fr }
          }),
        })
      }
      return out
    })

/** Canonical contents: exchanges back to back, merged where two user contents meet (responses, then the next user text). */
const conversation = fc.integer({ min: 1, max: 5 }).chain((k) =>
  fc.tuple(...Array.from({ length: k }, (_, i) => exchange(i))).map((xs) => {
    const out: Array<Json> = []
    for (const content of xs.flat()) {
      const last = out[out.length - 1]
      if (last !== undefined && last["role"] === content["role"]) (last["parts"] as Array<Json>).push(...(content["parts"] as Array<Json>))
      else out.push({ ...content, parts: [...(content["parts"] as Array<Json>)] })
    }
    return out
  }),
)

describe("Gemini round trip (property)", () => {
  it("canonical contents → neutral → render gives the same contents", () => {
    fc.assert(
      fc.property(conversation, fc.string({ minLength: 1, maxLength: 8 }), (contents, seed) => {
        const messages = Normalize.fromGemini(decodeContents(contents), { seed })
        const body = render(messages)
        expect(body.contents).toEqual(contents)
        expect(geminiPairingProblems(body)).toEqual([])
      }),
      { numRuns: 300 },
    )
  })

  it("tools: declarations sorted, schema under the key it came with, built-in tools as they came (sorted by kind)", () => {
    const tools = [
      {
        functionDeclarations: [
          { name: "a_lookup", description: "find", parameters: { type: "OBJECT", properties: { q: { type: "STRING" } } } },
          { name: "b_book", parametersJsonSchema: { type: "object", properties: { id: { type: "string" } }, additionalProperties: false } },
          { name: "c_ping" },
          { name: "d_stream", description: "x", parametersJsonSchema: { type: "object" }, behavior: "NON_BLOCKING" },
        ],
      },
      { codeExecution: {} },
      { googleSearch: {} },
    ]
    const neutral = Normalize.tools("gemini", decodeTools(tools))
    expect(neutral.map((t) => t.name)).toEqual(["a_lookup", "b_book", "c_ping", "d_stream", "codeExecution", "googleSearch"])
    expect(render([user("hi")], [], neutral).config["tools"]).toEqual(tools)
    // given in any order, sent sorted
    expect(render([user("hi")], [], [...neutral].reverse()).config["tools"]).toEqual(tools)
    // Gemini built-in tools reach no other format; Responses hosted tools do not reach Gemini
    const responsesBody = RenderResponses.render({
      tenant: "t",
      session: "s",
      model: gpt,
      system: [],
      tools: neutral,
      messages: [user("hi")],
    }).body
    expect(JSON.stringify(responsesBody["tools"])).not.toContain("googleSearch")
    const hosted: Conversation.Tool = { name: "web_search", inputSchema: {}, extra: { hosted: { type: "web_search" } } }
    expect(JSON.stringify(render([user("hi")], [], [hosted]).config)).not.toContain("web_search")
    // a tool from another format: JSON Schema goes to parametersJsonSchema
    const other: Conversation.Tool = { name: "f", description: "d", inputSchema: { type: "object", properties: {} } }
    expect(render([user("hi")], [], [other]).config["tools"]).toEqual([
      { functionDeclarations: [{ name: "f", description: "d", parametersJsonSchema: { type: "object", properties: {} } }] },
    ])
  })
})

describe("Normalize.fromGemini", () => {
  it("keeps thoughts verbatim, signatures on their parts, and makes up ids it never sends", () => {
    const contents = decodeContents([
      { role: "user", parts: [{ text: "hi" }] },
      {
        role: "model",
        parts: [
          { text: "plan", thought: true, thoughtSignature: "c2lnMA==" },
          { functionCall: { name: "lookup", args: { q: 1 } }, thoughtSignature: "c2lnMQ==" },
          { functionCall: { name: "lookup", args: { q: 2 } } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { name: "lookup", response: { output: "one" } } },
          { functionResponse: { name: "lookup", response: { error: "two failed" } } },
        ],
      },
    ])
    const [u, model, tool] = Normalize.fromGemini(contents, { seed: "turn-1" })
    expect(u).toEqual(user("hi"))
    expect(model!.parts[0]).toEqual({
      type: "opaque",
      format: "gemini",
      block: { text: "plan", thought: true, thoughtSignature: "c2lnMA==" },
    })
    const [first, second] = model!.parts.slice(1) as Array<Conversation.ToolCallPart>
    expect(first).toMatchObject({ name: "lookup", input: { q: 1 }, signature: "c2lnMQ==", generatedId: true })
    expect(first!.id).toMatch(/^gc_[0-9a-f]{16}$/)
    expect(second!.id).not.toBe(first!.id)
    // the responses answer the calls in order
    expect(tool!.parts).toEqual([result(first!.id, "one"), result(second!.id, "two failed", true)])
    // the same request gives the same ids; another turn other ones
    expect(Normalize.fromGemini(contents, { seed: "turn-1" })).toEqual([u, model, tool])
    expect((Normalize.fromGemini(contents, { seed: "turn-2" })[1]!.parts[1] as Conversation.ToolCallPart).id).not.toBe(first!.id)
    // other renderers: thoughts dropped, signatures ignored, the made-up ids are valid ids there
    const anthropic = RenderAnthropic.render({ model: claude, system: [], tools: [], messages: [u!, model!, tool!] }).body
    expect(JSON.stringify(anthropic)).not.toContain("c2ln")
    expect(JSON.stringify(anthropic)).not.toContain("plan")
    const openai = RenderOpenAI.render({ tenant: "t", session: "s", model: gpt, system: [], tools: [], messages: [u!, model!, tool!] }).body
    expect(JSON.stringify(openai)).toContain(first!.id)
    expect(JSON.stringify(openai)).not.toContain("c2ln")
  })

  it("a response without id in a later request answers the session's open call of its name (most recent step, oldest first)", () => {
    const turn1 = Normalize.fromGemini(
      decodeContents([
        { role: "user", parts: [{ text: "hi" }] },
        {
          role: "model",
          parts: [
            { functionCall: { name: "get_user", args: {} } },
            { functionCall: { name: "lookup", args: { q: "a" } } },
            { functionCall: { name: "lookup", args: { q: "b" } } },
          ],
        },
      ]),
      { seed: "t1" },
    )
    const ids = (turn1[1]!.parts as Array<Conversation.ToolCallPart>).map((p) => p.id)
    const known = new Set(ids)
    const open = () => Normalize.openCalls(turn1, known, new Set())
    expect(open().map((c) => c.name)).toEqual(["get_user", "lookup", "lookup"])
    const turn2 = Normalize.fromGeminiIndexed(
      decodeContents([
        {
          role: "user",
          parts: [
            { functionResponse: { name: "lookup", response: { output: "A" } } },
            { functionResponse: { name: "get_user", response: { output: "U" } } },
            { functionResponse: { name: "lookup", response: { output: "B" } } },
          ],
        },
      ]),
      { seed: "t2", open },
    )
    expect(turn2[0]!.message.parts).toEqual([result(ids[1]!, "A"), result(ids[0]!, "U"), result(ids[2]!, "B")])
    expect(Normalize.findPairingError(known, new Set(), turn2, "contents")).toBeUndefined()
    // a response nobody asked for: its name stands as the id, and the pairing check names contents[i]
    const stray = Normalize.fromGeminiIndexed(
      decodeContents([
        { role: "user", parts: [{ text: "x" }] },
        { role: "user", parts: [{ functionResponse: { name: "nope", response: {} } }] },
      ]),
      { open },
    )
    expect(Normalize.findPairingError(known, new Set(), stray, "contents")?.message).toBe(
      "contents[1]: tool result for unknown tool call 'nope'",
    )
  })

  it("systemInstruction (string or Content) is one more system section after `system`", () => {
    const base = { turnId: "t", model: { provider: "google" as const, name: "gemini-2.5-flash" }, format: "gemini" as const, contents: [] }
    expect(Normalize.request({ ...base, system: "first", systemInstruction: "second" }).system).toEqual([
      { id: "system", text: "first", cache: "5m" },
      { id: "systemInstruction", text: "second", cache: "5m" },
    ])
    expect(Normalize.request({ ...base, systemInstruction: { parts: [{ text: "a" }, { text: "b" }] } }).system).toEqual([
      { id: "systemInstruction", text: "a\n\nb", cache: "5m" },
    ])
  })
})

describe("RenderGemini", () => {
  it("puts systemInstruction, tools and maxOutputTokens in config (the @google/genai shape); toRest gives the REST body", () => {
    const body = render(
      [user("hi")],
      [
        { id: "a", text: "one", cache: "5m" },
        { id: "b", text: "  ", cache: "5m" },
        { id: "c", text: "two", cache: "1h" },
      ],
    )
    expect(body).toEqual({
      model: "gemini-2.5-flash",
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      config: { systemInstruction: { parts: [{ text: "one" }, { text: "two" }] }, maxOutputTokens: flash.maxOutputTokens },
    })
    expect(RenderGemini.toRest(body)).toEqual({
      contents: body.contents,
      systemInstruction: { parts: [{ text: "one" }, { text: "two" }] },
      generationConfig: { maxOutputTokens: flash.maxOutputTokens },
    })
  })

  it("merges a tool message and the user text after it; results as {output}, JSON objects as themselves, errors as {error}; masked results stay valid", () => {
    const messages: Array<Conversation.Message> = [
      user("go"),
      calls("c1", "c2", "c3"),
      { role: "tool", parts: [result("c1", "plain"), result("c2", '{"a":1,"b":[2]}'), result("c3", "boom", true)] },
      user("thanks"),
    ]
    const body = render(messages)
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "go" }] },
      { role: "model", parts: ["c1", "c2", "c3"].map((id) => ({ functionCall: { name: "lookup", args: { q: id }, id } })) },
      {
        role: "user",
        parts: [
          { functionResponse: { name: "lookup", response: { output: "plain" }, id: "c1" } },
          { functionResponse: { name: "lookup", response: { a: 1, b: [2] }, id: "c2" } },
          { functionResponse: { name: "lookup", response: { error: "boom" }, id: "c3" } },
          { text: "thanks" },
        ],
      },
    ])
    // through the pipeline with masking: old results become references, the body keeps Gemini's rules
    const history = stored(
      [
        user("go"),
        ...Array.from({ length: 6 }, (_, i) => [
          calls(`k${i}`),
          { role: "tool" as const, parts: [result(`k${i}`, "x".repeat(400))] },
        ]).flat(),
        user("done"),
      ],
      200,
    )
    const out = Pipeline.run(
      input(history, { format: "gemini", model: flash, options: Pipeline.resolveOptions({ maskKeep: 2, maskBatchTokens: 300 }) }),
    )
    expect(out.report.masking?.masked ?? 0).toBeGreaterThan(0)
    expect(geminiPairingProblems(out.request)).toEqual([])
  })

  it("images: inline data as inlineData, Google file URIs as fileData, other URLs as a note; foreign opaque parts noted", () => {
    const messages: Array<Conversation.Message> = [
      {
        role: "user",
        parts: [
          { type: "image", source: { kind: "base64", mediaType: "image/png", data: "AAAA" } },
          { type: "image", source: { kind: "url", url: "gs://bucket/cat.png" } },
          { type: "image", source: { kind: "url", url: "https://example.com/cat.png" } },
          { type: "opaque", format: "anthropic", block: { type: "document", source: {} } },
        ],
      },
      {
        role: "assistant",
        parts: [
          { type: "opaque", format: "anthropic", block: { type: "thinking", thinking: "hm", signature: "x" } },
          { type: "text", text: "done" },
        ],
      },
    ]
    expect(render(messages).contents).toEqual([
      {
        role: "user",
        parts: [
          { inlineData: { mimeType: "image/png", data: "AAAA" } },
          { fileData: { fileUri: "gs://bucket/cat.png" } },
          { text: "[image: https://example.com/cat.png]" },
          { text: "[anthropic document block omitted]" },
        ],
      },
      { role: "model", parts: [{ text: "done" }] },
    ])
  })

  it("a function call that arrived in a user content is kept opaque and not sent (it would break the pairing)", () => {
    const messages = Normalize.fromGemini(
      decodeContents([{ role: "user", parts: [{ text: "hi" }, { functionCall: { name: "f", args: {} } }] }]),
    )
    expect(messages[0]!.parts[1]).toMatchObject({ type: "opaque", format: "gemini" })
    expect(render(messages).contents).toEqual([{ role: "user", parts: [{ text: "hi" }] }])
  })

  it("Gemini 3: the first call of a step without a signature gets the documented placeholder; own signatures are kept", () => {
    const signed: Conversation.Message = { role: "assistant", parts: [{ ...call("s1"), signature: "b3du" }, call("s2")] }
    const messages = [
      user("go"),
      calls("c1", "c2"),
      { role: "tool" as const, parts: [result("c1"), result("c2")] },
      signed,
      { role: "tool" as const, parts: [result("s1"), result("s2")] },
    ]
    const parts = (i: number) => (render(messages, [], [], pro3).contents[i]!["parts"] as Array<Json>).map((p) => p["thoughtSignature"])
    expect(parts(1)).toEqual([RenderGemini.PLACEHOLDER_SIGNATURE, undefined])
    expect(parts(3)).toEqual(["b3du", undefined])
    // not for Gemini 2.5
    expect(JSON.stringify(render(messages).contents)).not.toContain(RenderGemini.PLACEHOLDER_SIGNATURE)
  })

  it("an unchanged prefix renders byte-identical when the conversation grows (implicit caching)", () => {
    fc.assert(
      fc.property(conversation, conversation, (first, more) => {
        const a = Normalize.fromGemini(decodeContents(first), { seed: "1" })
        const b = Normalize.fromGemini(decodeContents(more), { seed: "2" })
        const before = render(a, [{ id: "s", text: "sys", cache: "5m" }]).contents
        const after = render([...a, ...b], [{ id: "s", text: "sys", cache: "5m" }]).contents
        // all but the last content (which may merge with what follows) are sent again byte for byte
        expect(JSON.stringify(after.slice(0, before.length - 1))).toBe(JSON.stringify(before.slice(0, -1)))
      }),
      { numRuns: 100 },
    )
  })
})

describe("empty content (Gemini refuses an empty text part and a content without parts)", () => {
  const emptyText = (contents: ReadonlyArray<Json>) =>
    contents.flatMap((c) => (c["parts"] as Array<Json>).filter((p) => p["text"] === "" && p["thoughtSignature"] === undefined))

  it("an unsigned empty text part is never sent, and a content of only such parts is left out", () => {
    const messages = Normalize.fromGemini(
      decodeContents([
        { role: "user", parts: [{ text: "hi" }, { text: "" }] },
        { role: "model", parts: [{ text: "" }] },
        { role: "user", parts: [{ text: "more" }] },
      ]),
    )
    const body = render(messages)
    expect(emptyText(body.contents)).toEqual([])
    expect(body.contents.every((c) => (c["parts"] as Array<Json>).length > 0)).toBe(true)
    expect(ValidateGemini.validateGenerate({ contents: body.contents }, "gemini-2.5-flash")).toBeUndefined()
  })

  it("the fake provider's validator refuses an unsigned empty text part, as Gemini does, and keeps a signed one", () => {
    const problem = ValidateGemini.validateGenerate({ contents: [{ role: "user", parts: [{ text: "" }] }] }, "gemini-2.5-flash")
    expect(problem?.message).toMatch(/empty text parameter/)
    expect(
      ValidateGemini.validateGenerate(
        {
          contents: [
            { role: "user", parts: [{ text: "hi" }] },
            { role: "model", parts: [{ text: "", thoughtSignature: "c2ln" }] },
          ],
        },
        "gemini-2.5-flash",
      ),
    ).toBeUndefined()
  })
})
