/**
 * Mid-conversation system messages, through the worker's stages in-process
 * and the official Anthropic SDK against the fake provider: on a model whose
 * row has `midConversationSystem` the memory retrieved each turn and the
 * session's learnings go out as a system message after the turn's messages
 * and stay there, so the prefix (system, tools, every earlier message) is
 * the same bytes next turn while the memory changes; on other models the
 * body is as before. The fake provider takes `role: "system"` only where the
 * model does, and only right after a user turn.
 */
import { type Knowledge, MemoryRetrieval } from "@ctxd/context"
import { Knowledge as KnowledgeContract, type Turn } from "@ctxd/contracts"
import { KnowledgeStore, MemoryStore } from "@ctxd/db"
import { FakeProvider } from "@ctxd/testing"
import Anthropic from "@anthropic-ai/sdk"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

type Json = Record<string, unknown>
const NOW = Date.parse("2026-11-26T00:00:00Z")

let server: FakeProvider.FakeProviderServer
let client: Anthropic

beforeAll(async () => {
  server = await FakeProvider.start()
  client = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

/** A memory store whose memories name the text searched for (so they change every turn) and three lessons. */
const store = (): MemoryStore.MemoryStoreService => ({
  ...MemoryStore.makeMemory(),
  any: () => Effect.succeed(true),
  search: (_scope, text, options = {}) =>
    Effect.succeed(
      options.kind === "learning"
        ? [0, 1, 2].map((i) => ({
            id: `l${i}`,
            text: `Lesson ${i}: confirm before changing.`,
            kind: "learning" as const,
            tags: [],
            score: 1,
            updatedAt: new Date(NOW).toISOString(),
          }))
        : [
            {
              id: `m-${text}`,
              text: `The user asked about: ${text.split("\n")[0]}`,
              kind: "memory" as const,
              tags: [],
              score: 1,
              updatedAt: new Date(NOW).toISOString(),
            },
          ],
    ),
})

const session = (model: string) => {
  const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), memory: store() })
  let k = 0
  return (messages: ReadonlyArray<Json>): Promise<Turn.TurnReply> => {
    const req = {
      turnId: `t${k}`,
      format: "anthropic",
      model: { provider: "anthropic", name: model },
      system: "You are a travel agent. ".repeat(400),
      options: { agent: "travel" },
      messages,
    }
    return turns.turn("acme", `s-${model}`, req as unknown as Turn.TurnRequest, undefined, NOW + 1_000 * k++)
  }
}

const send = (body: Json) => client.messages.create({ ...body, max_tokens: 1_024 } as unknown as Anthropic.MessageCreateParamsNonStreaming)
const status = async (body: Json): Promise<{ status: number; message: string }> => {
  try {
    await send(body)
    return { status: 200, message: "" }
  } catch (e) {
    if (!(e instanceof Anthropic.APIError)) throw e
    return { status: e.status ?? 0, message: (e.error as { error?: { message?: string } } | undefined)?.error?.message ?? "" }
  }
}

/** The body without its `cache_control` marks (they move with the last message; the cache ignores them). */
const unmarked = (value: unknown): unknown =>
  JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === "cache_control" ? undefined : v))) as unknown
const messagesOf = (body: Json) => body["messages"] as Array<{ role: string; content: Array<Json> }>
const texts = (m: { content: Array<Json> }) => m.content.map((b) => String(b["text"]))

describe("mid-conversation system messages (Anthropic)", () => {
  it("a model that takes them: memory and learnings appended as system messages; the prefix stays byte-identical as the memory changes", async () => {
    const turn = session("claude-opus-5-5")
    const first = await turn([{ role: "user", content: "Change my seat" }])
    const one = messagesOf(first.request)
    expect(one.map((m) => m.role)).toEqual(["user", "system"])
    expect(texts(one[1]!)[0]).toMatch(new RegExp(`^${MemoryRetrieval.LEARNINGS_HEADER}`))
    expect(texts(one[1]!)[1]).toContain("Change my seat")
    // neither the system prompt nor the user's message carries them
    expect(JSON.stringify(first.request["system"])).not.toContain(MemoryRetrieval.LEARNINGS_HEADER)
    expect(JSON.stringify(one[0])).not.toContain(MemoryRetrieval.MEMORY_HEADER)
    const answer = await send(first.request)

    const second = await turn([
      { role: "assistant", content: answer.content },
      { role: "user", content: "The Paris one" },
    ])
    const two = messagesOf(second.request)
    expect(two.map((m) => m.role)).toEqual(["user", "system", "assistant", "user", "system"])
    // the learnings did not change: only the new memory is appended
    expect(texts(two[4]!)).toHaveLength(1)
    expect(texts(two[4]!)[0]).toContain("The Paris one")
    expect(unmarked(second.request["system"])).toEqual(unmarked(first.request["system"]))
    expect(unmarked(two.slice(0, one.length))).toEqual(unmarked(one))
    const again = await send(second.request)
    expect(again.usage.cache_read_input_tokens).toBeGreaterThan(0)
  })

  it("a model without them: the memory after the last breakpoint in the last user message, the learnings in the system, as before", async () => {
    const turn = session("claude-opus-4-7")
    const first = await turn([{ role: "user", content: "Change my seat" }])
    const one = messagesOf(first.request)
    expect(one.map((m) => m.role)).toEqual(["user"])
    expect(texts(one[0]!).some((t) => t.startsWith(MemoryRetrieval.MEMORY_HEADER))).toBe(true)
    expect(JSON.stringify(first.request["system"])).toContain(MemoryRetrieval.LEARNINGS_HEADER)
    expect((await status(first.request)).status).toBe(200)
  })
})

describe("a changed knowledge index on a model that takes system messages", () => {
  it("keeps the index the system was sent with and appends the new one as a system message, once", async () => {
    const knowledge = KnowledgeStore.makeMemory()
    const add = (doc: Knowledge.Doc) => Effect.runSync(knowledge.add("acme", KnowledgeContract.DEFAULT_AGENT, doc))
    add({ id: "refunds", title: "Refund policy", text: "Refunds within 30 days." })
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), knowledge })
    const bodies: Array<Json> = []
    for (let k = 0; k < 4; k++) {
      if (k === 2) add({ id: "baggage", title: "Baggage allowance", text: "Two bags." })
      const messages =
        k === 0
          ? [{ role: "user", content: "hello" }]
          : [
              { role: "assistant", content: `answer ${k}` },
              { role: "user", content: `question ${k}` },
            ]
      const req = {
        turnId: `t${k}`,
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-opus-5-5" },
        system: "Be brief.",
        messages,
      }
      bodies.push((await turns.turn("acme", "kb", req as unknown as Turn.TurnRequest, undefined, k * 10_000)).request)
    }
    for (const body of bodies.slice(1)) expect(unmarked(body["system"])).toEqual(unmarked(bodies[0]!["system"]))
    expect(JSON.stringify(bodies[0]!["system"])).not.toContain("Baggage allowance")
    const notes = (body: Json) => messagesOf(body).filter((m) => m.role === "system")
    expect(notes(bodies[1]!)).toEqual([])
    expect(notes(bodies[2]!).map(texts)).toEqual([[expect.stringContaining("Baggage allowance")]])
    // sent once: the next turn carries the same note, no second one
    expect(unmarked(notes(bodies[3]!))).toEqual(unmarked(notes(bodies[2]!)))
    expect((await status(bodies[3]!)).status).toBe(200)
  })
})

describe("the fake provider's system message rules", () => {
  const body = (model: string, messages: ReadonlyArray<Json>): Json => ({ model, max_tokens: 100, messages })
  const user = { role: "user", content: "hi" }
  const note = { role: "system", content: "Answer in French." }

  it("takes a system message right after a user turn where the model does, and refuses it elsewhere", async () => {
    expect(await status(body("claude-opus-5-5", [user, note]))).toEqual({ status: 200, message: "" })
    expect(await status(body("claude-opus-5-5", [user, note, { role: "assistant", content: "Oui." }, user]))).toEqual({
      status: 200,
      message: "",
    })
    expect(await status(body("claude-opus-4-7", [user, note]))).toEqual({
      status: 400,
      message: "messages.1.role: role 'system' is not supported on this model",
    })
    expect(await status(body("claude-opus-5-5", [user, { role: "assistant", content: "Hello." }, note, user]))).toEqual({
      status: 400,
      message: "messages.2: a `system` message must immediately follow a `user` message",
    })
    expect((await status(body("claude-opus-5-5", [note, user]))).status).toBe(400)
  })
})
