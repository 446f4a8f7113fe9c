import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as RenderOpenAI from "../src/providers/openai-chat/Render.ts"
import * as RenderedJson from "../src/RenderedJson.ts"
import { Models } from "../src/index.ts"
import { assistant, calls, results, user } from "./Helpers.ts"

// text in any script, multi-byte UTF-8 included
const json = fc.jsonValue({ maxDepth: 3, stringUnit: "grapheme" })
const part = fc.dictionary(fc.string({ maxLength: 6 }), json, { maxKeys: 4 })

/** A reply whose body arrays mix frozen parts (some repeated, as a history sent again is) with fresh ones and odd values. */
const reply = fc
  .record({
    shared: fc.array(part, { minLength: 1, maxLength: 4 }),
    fresh: fc.array(fc.oneof(part, json, fc.constant(undefined)), { maxLength: 4 }),
    picks: fc.array(fc.nat(), { maxLength: 8 }),
    extra: fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(json, fc.constant(undefined)), { maxKeys: 3 }),
    report: json,
  })
  .map(({ shared, fresh, picks, extra, report }) => {
    const frozen = shared.map((p) => RenderedJson.once(RenderedJson.memo(), {}, () => p))
    const messages = [...picks.map((i) => frozen[i % frozen.length]!), ...fresh]
    return { ok: true, turnId: "t", request: { model: "m", messages, ...extra, tools: frozen }, report }
  })

describe("RenderedJson", () => {
  it("writes the same text as JSON.stringify, however often its frozen parts are written", () => {
    fc.assert(
      fc.property(reply, (value) => {
        const expected = JSON.stringify(value)
        expect(RenderedJson.stringify(value)).toBe(expected)
        // the second time from the cached parts
        expect(RenderedJson.stringify(value)).toBe(expected)
      }),
    )
  })

  it("writes any other value as JSON.stringify does", () => {
    fc.assert(
      fc.property(fc.oneof(json, fc.record({ request: json }), fc.record({ request: fc.array(json) })), (value) => {
        expect(RenderedJson.stringify(value)).toBe(JSON.stringify(value))
      }),
    )
    expect(RenderedJson.stringify({ request: { toJSON: () => "x" } })).toBe('{"request":"x"}')
  })

  it("renders a source once, frozen, and leaves the object it shares with the source alone", () => {
    const memo = RenderedJson.memo()
    const schema = { type: "object", properties: {} }
    const source = { name: "lookup" }
    let renders = 0
    const render = () => {
      renders++
      return { type: "function", function: { name: source.name, parameters: schema } }
    }
    const first = RenderedJson.once(memo, source, render, schema)
    expect(RenderedJson.once(memo, source, render, schema)).toBe(first)
    expect(renders).toBe(1)
    expect(Object.isFrozen(first) && Object.isFrozen(first["function"])).toBe(true)
    expect(Object.isFrozen(schema)).toBe(false)
    expect(() => {
      ;(first as Record<string, unknown>)["type"] = "custom"
    }).toThrow(TypeError)
  })

  it("the OpenAI renderer sends a stored message as the same frozen part turn after turn", () => {
    const history = [user("find order 7"), calls("c1"), results("c1"), assistant("found it")]
    const input = {
      model: Models.resolve({ provider: "openai", name: "gpt-4o" }),
      system: [{ id: "s", text: "be brief", cache: "none" as const }],
      tools: [],
      messages: history,
      toolOrder: "given" as const,
      tenant: "t",
      session: "s",
    }
    const a = RenderOpenAI.render(input).body["messages"] as ReadonlyArray<object>
    const b = RenderOpenAI.render({ ...input, messages: [...history, user("thanks")] }).body["messages"] as ReadonlyArray<object>
    expect(b.slice(0, a.length)).toEqual(a)
    for (let i = 0; i < a.length; i++) expect(b[i]).toBe(a[i])
    expect(a.every((m) => Object.isFrozen(m))).toBe(true)
  })
})
