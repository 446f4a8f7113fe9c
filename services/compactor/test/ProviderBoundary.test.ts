/**
 * A provider compaction in the history is a summary boundary: the view
 * starts at it (a ctxd summary made before it is superseded, one made after
 * it follows it), the cut never folds across it, the pipeline sends nothing
 * before it yet still the newest exchange with pairing intact, and the
 * bodies it renders are accepted by the official SDKs against the fake
 * provider (which reads and bills the prompt from the compaction on).
 */
import Anthropic from "@anthropic-ai/sdk"
import { Models, Pipeline } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import fc from "fast-check"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Plan, View } from "../src/index.ts"

type Json = Record<string, unknown>
type Format = "anthropic" | "openai-responses"

const BETA = "compact-2026-01-12"
const text = (role: "user" | "assistant", t: string): Conversation.Message => ({ role, parts: [{ type: "text", text: t }] })
const call = (ids: ReadonlyArray<string>): Conversation.Message => ({
  role: "assistant",
  parts: ids.map((id) => ({ type: "tool_call", id, name: "lookup", input: { id } })),
})
const result = (id: string): Conversation.Message => ({
  role: "tool",
  parts: [{ type: "tool_result", callId: id, content: [{ type: "text", text: `result ${id}` }], isError: false }],
})
const compactionPart = (format: Format, tag: string): Conversation.OpaquePart =>
  format === "anthropic"
    ? { type: "opaque", format, block: { type: "compaction", content: `summary ${tag}`, encrypted_content: null } }
    : { type: "opaque", format, block: { type: "compaction", id: `cmp_${tag}`, encrypted_content: `enc-${tag}` } }
/** The message a provider's reply becomes: its compaction, then (Anthropic) the text after it. */
const compaction = (format: Format, tag: string, before: ReadonlyArray<Conversation.Part> = []): Conversation.Message => ({
  role: "assistant",
  parts: [...before, compactionPart(format, tag), ...(format === "anthropic" ? [{ type: "text" as const, text: `after ${tag}` }] : [])],
})
const stored = (messages: ReadonlyArray<Conversation.Message>, tokens: (i: number) => number = () => 100): Array<Pipeline.StoredMessage> =>
  messages.map((message, i) => ({ seq: i + 1, message, tokens: tokens(i) }))
const session = (n: number, from = 0): Array<Conversation.Message> =>
  Array.from({ length: n }, (_, k) => {
    const i = from + k
    return [call([`c${i}`]), result(`c${i}`), text("assistant", `step ${i} done`)]
  }).flat()
const count = (m: Conversation.Message) => JSON.stringify(m).length

describe("View: a provider compaction is a boundary", () => {
  const history = stored([
    text("user", "Fix the parser."),
    ...session(5),
    compaction("anthropic", "A", [{ type: "text", text: "pre" }]),
    text("user", "go on"),
    ...session(3, 5),
  ])
  const at = 16 // index of the compaction message

  it("the view starts at the boundary message, trimmed to its compaction part onwards", () => {
    const view = View.applySummary(history, undefined, count, "anthropic")
    expect(view.boundary).toEqual({ index: at, seq: at + 1, format: "anthropic" })
    expect(view.messages[0]!.message.parts.map((p) => p.type)).toEqual(["opaque", "text"])
    expect(view.messages.slice(1)).toEqual(history.slice(at + 1))
    expect(View.foldedThrough(view)).toBe(at + 1)
    // the other format's compaction is no boundary for it
    expect(View.applySummary(history, undefined, count, "openai-responses").messages).toBe(history)
    // any format's without a format
    expect(View.applySummary(history, undefined, count).boundary?.index).toBe(at)
  })

  it("a ctxd summary made before it is superseded; one made after it follows it", () => {
    const before: View.Summary = { id: 1, coversFromSeq: 1, coversToSeq: 10, text: "old", mode: "rolling", depth: 1 }
    const superseded = View.applySummary(history, before, count, "anthropic")
    expect(superseded.summary).toBeUndefined()
    expect(superseded.given).toBe(before)
    expect(superseded.messages).toEqual(View.applySummary(history, undefined, count, "anthropic").messages)
    const after: View.Summary = { id: 2, coversFromSeq: at + 2, coversToSeq: at + 5, text: "new", mode: "rolling", depth: 1 }
    const view = View.applySummary(history, after, count, "anthropic")
    expect(view.summary).toBe(after)
    expect(view.messages.map((m) => m.seq).slice(0, 4)).toEqual([at + 1, at + 2, at + 5, at + 6])
    expect(view.messages[1]!.message.parts[0]).toMatchObject({ type: "text", text: expect.stringContaining("new") })
    expect(View.foldedThrough(view)).toBe(at + 5)
    // without the format's boundary the summary applies as before
    expect(View.applySummary(history, before, count, "openai-responses").summary).toBe(before)
  })

  it("extend appends after the boundary, and starts anew at a boundary that arrives", () => {
    const view = View.applySummary(history.slice(0, 20), undefined, count, "anthropic")
    expect(View.extend(view, history).messages).toEqual(View.applySummary(history, undefined, count, "anthropic").messages)
    const before: View.Summary = { id: 1, coversFromSeq: 1, coversToSeq: 10, text: "old", mode: "rolling", depth: 1 }
    const early = View.applySummary(history.slice(0, 12), before, count, "anthropic")
    expect(early.summary).toBe(before)
    const extended = View.extend(early, history)
    expect(extended.key).not.toBe(early.key)
    expect(extended.messages).toEqual(View.applySummary(history, before, count, "anthropic").messages)
    // a newer boundary replaces the older one
    const more = stored([...history.map((h) => h.message), compaction("anthropic", "B"), text("user", "again")])
    const moved = View.extend(View.applySummary(history, undefined, count, "anthropic"), more)
    expect(moved.boundary?.index).toBe(history.length)
    expect(moved.messages.length).toBe(2)
  })
})

describe("Plan.planCut never folds across a provider compaction", () => {
  const t: Plan.Thresholds = { ...Plan.defaults, tailKeepTokens: 1_000 }

  it("the span starts after the boundary and does not roll a summary made before it", () => {
    const messages = [
      text("user", "Fix the parser."),
      ...session(10),
      compaction("openai-responses", "A"),
      text("user", "go on"),
      ...session(20, 10),
    ]
    const history = stored(messages)
    const b = 31
    const before: View.Summary = { id: 1, coversFromSeq: 1, coversToSeq: 20, text: "old", mode: "rolling", depth: 1 }
    const cut = Plan.planCut(history, before, 100_000, t, { format: "openai-responses" })
    expect(cut).toMatchObject({ _tag: "Cut", fromIndex: b + 1, coversFromSeq: b + 2, previous: undefined })
    // a summary made after it rolls on
    const after: View.Summary = { id: 2, coversFromSeq: b + 2, coversToSeq: b + 10, text: "new", mode: "rolling", depth: 1 }
    const next = Plan.planCut(history, after, 100_000, t, { format: "openai-responses" })
    expect(next).toMatchObject({ _tag: "Cut", coversFromSeq: b + 2, previous: after })
    // another format's compaction does not bound it; with no format, any does
    expect(Plan.planCut(history, undefined, 100_000, t, { format: "anthropic" })).toMatchObject({ _tag: "Cut", fromIndex: 0 })
    expect(Plan.planCut(history, undefined, 100_000, t)).toMatchObject({ _tag: "Cut", fromIndex: b + 1 })
    // nothing after the boundary to fold
    const short = stored([...messages.slice(0, b + 1), text("user", "go on")])
    expect(Plan.planCut(short, undefined, 100_000, t, { format: "openai-responses" })).toMatchObject({ _tag: "NoBoundary" })
  })

  it("property: the cut's span always starts after the latest boundary", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 200, max: 3_000 }),
        (head, tail, keep) => {
          const history = stored([
            text("user", "task"),
            ...session(head),
            compaction("anthropic", "X"),
            text("user", "more"),
            ...session(tail, head),
          ])
          const b = 1 + head * 3
          const cut = Plan.planCut(history, undefined, 1_000_000, { ...Plan.defaults, tailKeepTokens: keep }, { format: "anthropic" })
          if (cut._tag === "Cut") {
            expect(cut.fromIndex).toBeGreaterThan(b)
            expect(cut.coversFromSeq).toBeGreaterThan(history[b]!.seq)
          }
        },
      ),
      { numRuns: 200 },
    )
  })
})

// ------------------------------------------------------------------ pipeline

const marker = (i: number): string => `⟨m${i}⟩`

type Step = { readonly kind: "user" | "assistant" | "system" } | { readonly kind: "calls"; readonly n: number; readonly answered: boolean }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("user" as const, "assistant" as const).map((kind) => ({ kind })) },
  { weight: 1, arbitrary: fc.constant({ kind: "system" as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("calls" as const), n: fc.integer({ min: 1, max: 3 }), answered: fc.boolean() }) },
)

/** Messages from steps; every text carries the marker of its history index. */
const build = (
  steps: ReadonlyArray<Step>,
  boundaryAt: number,
  format: Format,
  extra: "none" | "older" | "foreign",
): Array<Conversation.Message> => {
  const out: Array<Conversation.Message> = []
  let id = 0
  steps.forEach((s, k) => {
    if (k === boundaryAt) {
      out.push(compaction(format, `B${out.length}`, [{ type: "text", text: `⟨pre${out.length}⟩` }]))
      out[out.length - 1] = {
        ...out.at(-1)!,
        parts: out
          .at(-1)!
          .parts.map((p) => (p.type === "text" && !p.text.startsWith("⟨pre") ? { ...p, text: `${marker(out.length - 1)} ${p.text}` } : p)),
      }
    }
    if (k === Math.floor(boundaryAt / 2) && extra !== "none")
      out.push(compaction(extra === "older" ? format : format === "anthropic" ? "openai-responses" : "anthropic", `O${out.length}`))
    const m = marker(out.length)
    switch (s.kind) {
      case "user":
      case "assistant":
        out.push(text(s.kind, `${m} ${s.kind}`))
        break
      case "system":
        out.push({ role: "system", parts: [{ type: "text", text: `${m} rule` }] })
        break
      case "calls": {
        const ids = Array.from({ length: s.n }, () => `call${id++}`)
        out.push({
          role: "assistant",
          parts: [
            { type: "text", text: m },
            ...ids.map((i): Conversation.ToolCallPart => ({ type: "tool_call", id: i, name: "t0", input: { i } })),
          ],
        })
        if (s.answered)
          out.push({
            role: "tool",
            parts: ids.map((i) => ({
              type: "tool_result" as const,
              callId: i,
              content: [{ type: "text" as const, text: `${marker(out.length)} r${i}` }],
              isError: false,
            })),
          })
      }
    }
  })
  return out
}

const scenario = fc
  .record({
    steps: fc.array(step, { minLength: 2, maxLength: 40 }),
    boundary: fc.nat(),
    format: fc.constantFrom("anthropic" as const, "openai-responses" as const),
    extra: fc.constantFrom("none" as const, "older" as const, "foreign" as const),
    windowMessages: fc.integer({ min: 2, max: 12 }),
    windowStep: fc.integer({ min: 1, max: 4 }),
    maskKeep: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
  })
  .map((s) => ({ ...s, boundaryAt: s.boundary % s.steps.length }))

const run = (history: ReadonlyArray<Pipeline.StoredMessage>, format: Format, options: Pipeline.Options) =>
  Pipeline.run({
    tenant: "acme",
    session: "s1",
    format,
    model: Models.resolve(
      format === "anthropic" ? { provider: "anthropic", name: "claude-sonnet-4-5" } : { provider: "openai", name: "gpt-4.1" },
    ),
    system: [{ id: "system", text: "You are helpful.", cache: "5m" }],
    systemTokens: 5,
    tools: [{ name: "t0", inputSchema: { type: "object", properties: {} } }],
    toolsTokens: 10,
    history,
    options,
    counter: { backend: "test", encoding: "o200k_base", exact: false, calibration: 1 },
  })

describe("the pipeline over a view with a provider boundary (properties)", () => {
  it("sends nothing before the boundary, keeps it, the newest exchange and valid pairing; deterministic", () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const messages = build(s.steps, s.boundaryAt, s.format, s.extra)
        const history = stored(messages, (i) => 20 + (i % 7) * 30)
        const view = View.applySummary(history, undefined, count, s.format)
        const b = view.boundary!.index
        expect(history[b]!.message.parts.some((p) => p.type === "opaque" && p.format === s.format)).toBe(true)
        const options = Pipeline.resolveOptions({
          windowMessages: s.windowMessages,
          windowStep: s.windowStep,
          ...(s.maskKeep === undefined ? {} : { maskKeep: s.maskKeep }),
        })
        const out = run(view.messages, s.format, options)
        const body = JSON.stringify(out.request)
        for (let i = 0; i < b; i++) expect(body).not.toContain(marker(i))
        expect(body).not.toContain("⟨pre")
        // the boundary's compaction goes out first among the messages, verbatim
        const block = (history[b]!.message.parts.find((p) => p.type === "opaque" && p.format === s.format) as Conversation.OpaquePart)
          .block as Json
        if (s.format === "anthropic") {
          const first = (out.request["messages"] as Array<Json>)[0]!
          expect(first["role"]).toBe("assistant")
          expect({ ...(first["content"] as Array<Json>)[0] }).toMatchObject(block)
        } else {
          const input = out.request["input"] as Array<Json>
          const firstCompaction = input.findIndex((i) => i["type"] === "compaction")
          expect(input[firstCompaction]).toEqual(block)
          expect(input.slice(0, firstCompaction).every((i) => i["role"] === "system" || i["role"] === "developer")).toBe(true)
        }
        // the newest exchange: the latest request after the boundary and the last message
        const latest = history
          .map((h, i) => ({ h, i }))
          .filter(({ h, i }) => i > b && h.message.role === "user")
          .at(-1)
        if (latest !== undefined) expect(body).toContain(marker(latest.i))
        const last = history.length - 1
        if (last > b && history[last]!.message.role !== "tool") expect(body).toContain(marker(last))
        // valid as the provider checks it (pairing included), with the compaction beta
        expect(FakeProvider.validateRequest(s.format, out.request, [BETA])).toBeUndefined()
        expect(run(view.messages, s.format, options).request).toEqual(out.request)
      }),
      { numRuns: 300 },
    )
  })
})

// ---------------------------------------------------------------- the SDKs

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

const reject = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p
  } catch (e) {
    return JSON.stringify((e as { error?: unknown }).error ?? String(e))
  }
  throw new Error("expected a 400")
}

describe("ctxd's bodies with a provider compaction through the official SDKs", () => {
  const messages = [
    text("user", "Fix the parser."),
    ...session(4),
    compaction("anthropic", "A"),
    text("user", "go on"),
    ...session(2, 4),
    text("user", "and the tests?"),
  ]

  it("Anthropic (beta compact-2026-01-12): accepted, billed from the compaction on; refused without the beta", async () => {
    const history = stored(messages)
    const view = View.applySummary(history, undefined, count, "anthropic")
    const body = run(view.messages, "anthropic", Pipeline.resolveOptions(undefined)).request
    const params = { ...body, betas: [BETA] } as unknown as Anthropic.Beta.Messages.MessageCreateParamsNonStreaming
    const reply = await anthropic.beta.messages.create(params)
    expect(reply.type).toBe("message")
    const billed = reply.usage.input_tokens + (reply.usage.cache_read_input_tokens ?? 0) + (reply.usage.cache_creation_input_tokens ?? 0)
    expect(billed).toBe(FakeProvider.countRequestTokens("anthropic", body))
    // the same body with the folded messages in front bills the same: the API drops them
    const full = { ...body, messages: [{ role: "user", content: "Fix the parser. ".repeat(50) }, ...(body["messages"] as Array<Json>)] }
    expect(FakeProvider.countRequestTokens("anthropic", full)).toBe(FakeProvider.countRequestTokens("anthropic", body))
    const { max_tokens: _max, ...countable } = full as Json
    const counted = await anthropic.beta.messages.countTokens({
      ...countable,
      betas: [BETA],
    } as unknown as Anthropic.Beta.Messages.MessageCountTokensParams)
    expect(counted.input_tokens).toBe(billed)
    // with the compaction edit of context_management
    const managed = await anthropic.beta.messages.create({
      ...params,
      context_management: { edits: [{ type: "compact_20260112", trigger: { type: "input_tokens", value: 150_000 } }] },
    })
    expect(managed.type).toBe("message")
    // without the beta the block (and the edit) are refused
    expect(await reject(anthropic.messages.create(body as unknown as Anthropic.MessageCreateParamsNonStreaming))).toContain(BETA)
    // malformed blocks are refused
    const withBlock = (block: Json) => ({
      ...params,
      messages: [
        { role: "assistant", content: [block] },
        { role: "user", content: "hi" },
      ],
    })
    expect(await reject(anthropic.beta.messages.create(withBlock({ type: "compaction", content: "" }) as never))).toContain("non-empty")
    expect(await reject(anthropic.beta.messages.create(withBlock({ type: "compaction", content: 3 }) as never))).toContain("content")
    expect(await reject(anthropic.beta.messages.create(withBlock({ type: "compaction", content: "s", extra: 1 }) as never))).toContain(
      "extra",
    )
    const inUser = { ...params, messages: [{ role: "user", content: [{ type: "compaction", content: "s" }] }] }
    expect(await reject(anthropic.beta.messages.create(inUser as never))).toContain("assistant messages")
    // a failed compaction (content null) is a no-op the API accepts
    expect(
      (await anthropic.beta.messages.create(withBlock({ type: "compaction", content: null, encrypted_content: null }) as never)).type,
    ).toBe("message")
  })

  it("OpenAI Responses: a compaction item accepted by responses.create, billed from it on; malformed ones refused", async () => {
    const responses = messages.map((m) => (m.parts.some((p) => p.type === "opaque") ? compaction("openai-responses", "A") : m))
    const history = stored(responses)
    const view = View.applySummary(history, undefined, count, "openai-responses")
    const body = run(view.messages, "openai-responses", Pipeline.resolveOptions(undefined)).request
    const reply = await openai.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(reply.status).toBe("completed")
    expect(reply.usage?.input_tokens).toBe(FakeProvider.countRequestTokens("openai-responses", body))
    const input = body["input"] as Array<Json>
    const full = { ...body, input: [{ type: "message", role: "user", content: "Fix the parser. ".repeat(50) }, ...input] }
    expect(FakeProvider.countRequestTokens("openai-responses", full)).toBe(FakeProvider.countRequestTokens("openai-responses", body))
    // with server-side compaction on
    const managed = await openai.responses.create({
      ...(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming),
      context_management: [{ type: "compaction", compact_threshold: 200_000 }],
    })
    expect(managed.status).toBe("completed")
    const withItem = (item: Json) => ({ model: "gpt-4.1", input: [{ type: "message", role: "user", content: "hi" }, item] })
    expect(await reject(openai.responses.create(withItem({ type: "compaction" }) as never))).toContain("encrypted_content")
    expect(await reject(openai.responses.create(withItem({ type: "compaction", encrypted_content: "x", summary: [] }) as never))).toContain(
      "summary",
    )
    expect(
      await reject(
        openai.responses.create({
          ...withItem({ type: "compaction", encrypted_content: "x" }),
          context_management: [{ type: "truncate" }],
        } as never),
      ),
    ).toContain("context_management")
  })
})
