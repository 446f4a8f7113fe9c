/**
 * Turns sent with the client's whole history (`history: "client"`), through
 * the worker's shell in memory: only what is new is appended; a history that
 * no longer extends the stored one starts a branch of its own, and either
 * line goes on where it left off, never mixed with the other.
 */
import { Turn } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import { Schema } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"

const tiktoken = LocalCounter.make({ backend: "tiktoken" })
const encoding = tiktoken.encodingFor({ provider: "openai", name: "gpt-4o" })
const local = {
  encoding,
  countText: (text: string) => tiktoken.countText(text, encoding),
  countTools: (list: Parameters<typeof tiktoken.countTools>[0]) => tiktoken.countTools(list, encoding),
  countMessage: (message: Parameters<typeof tiktoken.countMessage>[0]) => tiktoken.countMessage(message, encoding),
  countSystem: (system: Parameters<typeof tiktoken.countSystem>[0]) => tiktoken.countSystem(system, encoding),
}

const u = (content: string) => ({ role: "user", content })
const a = (content: string) => ({ role: "assistant", content })
const chat = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>, history: "client" | "none" = "client") =>
  ({
    turnId,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    system: "Be brief.",
    messages,
    ...(history === "none" ? {} : { history }),
  }) as unknown as Turn.TurnRequest

let turns: InProcessTurns.InProcessTurns
const open = () => (turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) }))
afterEach(() => turns?.dispose())

/** The user texts of a reply's body (what the model would see), in order. */
const texts = (reply: Turn.TurnReply) =>
  (reply.request["messages"] as ReadonlyArray<{ role: string; content: unknown }>).filter((m) => m.role !== "system").map((m) => m.content)

describe("client history turns", () => {
  it("append only what is new, by content", async () => {
    open()
    const one = await turns.turn("acme", "s", chat("t1", [u("hello")]))
    expect(one.report.history).toEqual({ mode: "client", session: "s", branch: 0, matched: 0, appended: 1 })
    const two = await turns.turn("acme", "s", chat("t2", [u("hello"), a("hi"), u("list files")]))
    expect(two.report.history).toMatchObject({ session: "s", branch: 0, matched: 1, appended: 2 })
    expect(two.report.messages.stored).toBe(3)
    expect(texts(two)).toEqual(["hello", "hi", "list files"])
    // the same history again (a client retry under a new turn id): nothing new, nothing stored twice
    const again = await turns.turn("acme", "s", chat("t3", [u("hello"), a("hi"), u("list files")]))
    expect(again.report.history).toMatchObject({ branch: 0, matched: 3, appended: 0 })
    expect(again.report.messages.stored).toBe(3)
    // the same turn id and content: the stored reply
    expect(await turns.turn("acme", "s", chat("t2", [u("hello"), a("hi"), u("list files")]))).toEqual(two)
    // and so after the session moved on: a late retry is not a fork
    await turns.turn("acme", "s", chat("t4", [u("hello"), a("hi"), u("list files"), a("a.ts"), u("more")]))
    expect(await turns.turn("acme", "s", chat("t2", [u("hello"), a("hi"), u("list files")]))).toEqual(two)
    expect(await turns.turn("acme", "s", chat("t1", [u("hello")]))).toMatchObject({ report: { history: { branch: 0, appended: 1 } } })
  })

  it("start a branch when the client's history no longer extends the stored one, and keep both lines apart", async () => {
    open()
    await turns.turn("acme", "s", chat("t1", [u("hello")]))
    await turns.turn("acme", "s", chat("t2", [u("hello"), a("hi"), u("list files")]))
    // the client edited its history (compacted it into a summary)
    const edited = await turns.turn("acme", "s", chat("t3", [u("summary: said hello"), a("ok"), u("go on")]))
    const branch = edited.report.history!
    expect(branch).toMatchObject({ branch: 1, matched: 0, appended: 3, forked: { from: "s", at: 0, reason: "diverged" } })
    expect(branch.session).toMatch(/^s-b1-[0-9a-f]{10}$/)
    expect(edited.report.messages.stored).toBe(3)
    expect(texts(edited)).toEqual(["summary: said hello", "ok", "go on"])
    // the branch goes on
    const next = await turns.turn("acme", "s", chat("t4", [u("summary: said hello"), a("ok"), u("go on"), a("done"), u("thanks")]))
    expect(next.report.history).toMatchObject({ session: branch.session, branch: 1, matched: 3, appended: 2 })
    expect(next.report.messages.stored).toBe(5)
    // and so does the main line (a sub-agent's and the main loop's calls interleave), with nothing of the branch in it
    const main = await turns.turn("acme", "s", chat("t5", [u("hello"), a("hi"), u("list files"), a("a.ts"), u("more")]))
    expect(main.report.history).toMatchObject({ session: "s", branch: 0, matched: 3, appended: 2 })
    expect(main.report.messages.stored).toBe(5)
    expect(texts(main)).toEqual(["hello", "hi", "list files", "a.ts", "more"])
  })

  it("start a branch when the client rewinds into the stored history", async () => {
    open()
    await turns.turn("acme", "s", chat("t1", [u("hello")]))
    await turns.turn("acme", "s", chat("t2", [u("hello"), a("hi"), u("list files")]))
    const rewound = await turns.turn("acme", "s", chat("t3", [u("hello")]))
    expect(rewound.report.history).toMatchObject({ branch: 1, appended: 1, forked: { from: "s", at: 1, reason: "shorter" } })
    // the rewound line goes on in its branch
    const on = await turns.turn("acme", "s", chat("t4", [u("hello"), a("HI"), u("x")]))
    expect(on.report.history).toMatchObject({ branch: 1, matched: 1, appended: 2 })
    // a history neither line holds forks from the newest tried first (the branch this worker holds)
    const other = await turns.turn("acme", "s", chat("t5", [u("bye")]))
    expect(other.report.history).toMatchObject({ branch: 2, forked: { from: on.report.history!.session, at: 0, reason: "diverged" } })
  })

  it("take the history in clientHistory, which a worker of an earlier release refuses instead of appending it", async () => {
    open()
    const moved = (turnId: string, history: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) => {
      const { messages: _messages, ...rest } = chat(turnId, []) as unknown as Record<string, unknown>
      return { ...rest, clientHistory: history, ...extra } as unknown as Turn.TurnRequest
    }
    const one = await turns.turn("acme", "h", moved("t1", [u("hello")]))
    expect(one.report.history).toMatchObject({ session: "h", appended: 1 })
    const two = await turns.turn("acme", "h", moved("t2", [u("hello"), a("hi"), u("more")]))
    expect(two.report.history).toMatchObject({ matched: 1, appended: 2 })
    expect(texts(two)).toEqual(["hello", "hi", "more"])
    // an earlier release decodes the request with messages required: refused, nothing appended
    const earlier = Schema.decodeUnknownEither(Turn.OpenAITurnRequest)(moved("t3", [u("x")]))
    expect(earlier._tag).toBe("Left")
    // clientHistory without history: "client", or beside messages: refused, naming it
    await expect(turns.turn("acme", "h", moved("t4", [u("x")], { history: undefined }))).rejects.toMatchObject({ path: "clientHistory" })
    await expect(turns.turn("acme", "h", moved("t5", [u("x")], { messages: [] }))).rejects.toMatchObject({ path: "clientHistory" })
  })

  it("keep delta turns as they were: no history report, the messages appended as sent", async () => {
    open()
    const one = await turns.turn("acme", "d", chat("t1", [u("hello")], "none"))
    expect(one.report.history).toBeUndefined()
    const two = await turns.turn("acme", "d", chat("t2", [a("hi"), u("more")], "none"))
    expect(two.report.messages.stored).toBe(3)
  })

  it("match Anthropic histories whose cache breakpoints move and whose text turns into blocks", async () => {
    open()
    const claude = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>) =>
      ({
        turnId,
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-sonnet-4-5" },
        history: "client",
        system: "You are a coding agent.",
        tools: [{ name: "ls", description: "list", input_schema: { type: "object" } }],
        messages,
      }) as unknown as Turn.TurnRequest
    const cached = (text: string) => [{ type: "text", text, cache_control: { type: "ephemeral" } }]
    const call = {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "list them", signature: "sig-1" },
        { type: "tool_use", id: "toolu_1", name: "ls", input: {} },
      ],
    }
    const result = { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a.ts" }] }
    await turns.turn("acme", "c", claude("t1", [{ role: "user", content: cached("list the files") }]))
    const two = await turns.turn(
      "acme",
      "c",
      claude("t2", [
        { role: "user", content: "list the files" },
        call,
        { ...result, content: [{ ...result.content[0], cache_control: { type: "ephemeral" } }] },
      ]),
    )
    expect(two.report.history).toMatchObject({ branch: 0, matched: 1, appended: 2 })
    const three = await turns.turn(
      "acme",
      "c",
      claude("t3", [
        { role: "user", content: [{ type: "text", text: "list the files" }] },
        call,
        result,
        { role: "assistant", content: [{ type: "text", text: "a.ts" }] },
        { role: "user", content: cached("thanks") },
      ]),
    )
    expect(three.report.history).toMatchObject({ branch: 0, matched: 3, appended: 2 })
  })

  it("take a client's mid-conversation system message (Claude Code's) and match it on every resend", async () => {
    open()
    const claude = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>) =>
      ({
        turnId,
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-sonnet-4-5" },
        history: "client",
        system: "You are Claude Code.",
        messages,
      }) as unknown as Turn.TurnRequest
    const head = [
      { role: "user", content: "fix the bug" },
      { role: "system", content: [{ type: "text", text: "The date is today." }] },
    ]
    const one = await turns.turn("acme", "m", claude("t1", head))
    expect(one.report.history).toMatchObject({ appended: 2 })
    // where the model takes no mid-conversation system message, it reads as user text at its place
    expect(JSON.stringify(one.request["messages"])).toContain("The date is today.")
    const two = await turns.turn(
      "acme",
      "m",
      claude("t2", [...head, { role: "assistant", content: "ok" }, { role: "user", content: "go" }]),
    )
    expect(two.report.history).toMatchObject({ branch: 0, matched: 2, appended: 2 })
  })

  it("match Responses input items (reasoning, calls, outputs) on every resend", async () => {
    open()
    const codex = (turnId: string, input: ReadonlyArray<Record<string, unknown>>) =>
      ({
        turnId,
        format: "openai-responses",
        model: { provider: "openai", name: "gpt-5" },
        history: "client",
        instructions: "You are Codex.",
        tools: [{ type: "function", name: "shell", parameters: { type: "object" } }],
        input,
      }) as unknown as Turn.TurnRequest
    const user = (text: string) => ({ type: "message", role: "user", content: [{ type: "input_text", text }] })
    const reasoning = { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAAA-opaque" }
    const call = { type: "function_call", id: "fc_1", call_id: "call_1", name: "shell", arguments: '{"cmd":"ls"}' }
    const output = { type: "function_call_output", call_id: "call_1", output: "a.ts" }
    await turns.turn("acme", "r", codex("t1", [user("list")]))
    const two = await turns.turn("acme", "r", codex("t2", [user("list"), reasoning, call, output]))
    expect(two.report.history).toMatchObject({ branch: 0, matched: 1 })
    const answer = { type: "message", role: "assistant", content: [{ type: "output_text", text: "a.ts" }] }
    const three = await turns.turn("acme", "r", codex("t3", [user("list"), reasoning, call, output, answer, user("ok")]))
    expect(three.report.history).toMatchObject({
      branch: 0,
      matched: two.report.history!.matched + two.report.history!.appended,
      appended: 2,
    })
  })

  it("match Gemini calls without ids on every resend", async () => {
    open()
    const gemini = (turnId: string, contents: ReadonlyArray<Record<string, unknown>>) =>
      ({
        turnId,
        format: "gemini",
        model: { provider: "google", name: "gemini-2.5-flash" },
        history: "client",
        tools: [{ functionDeclarations: [{ name: "ls", description: "list", parameters: { type: "object" } }] }],
        contents,
      }) as unknown as Turn.TurnRequest
    const first = [{ role: "user", parts: [{ text: "list" }] }]
    const called = [...first, { role: "model", parts: [{ functionCall: { name: "ls", args: {} } }] }]
    const answered = [...called, { role: "user", parts: [{ functionResponse: { name: "ls", response: { output: "a.ts" } } }] }]
    await turns.turn("acme", "g", gemini("t1", first))
    const two = await turns.turn("acme", "g", gemini("t2", answered))
    expect(two.report.history).toMatchObject({ branch: 0, matched: 1, appended: 2 })
    const three = await turns.turn("acme", "g", gemini("t3", [...answered, { role: "model", parts: [{ text: "a.ts" }] }, ...first]))
    expect(three.report.history).toMatchObject({ branch: 0, matched: 3, appended: 2 })
  })
})
