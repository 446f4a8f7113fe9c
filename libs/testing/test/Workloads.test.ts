import { Anthropic, OpenAI, Turn } from "@ctxd/contracts"
import { describe, expect, it } from "@effect/vitest"
import { Either, ParseResult, Schema } from "effect"
import { TestNats, Workloads } from "../src/index.ts"

const strict = { onExcessProperty: "error" } as const
const check = <A, I>(schema: Schema.Schema<A, I>, value: unknown, where: string): void => {
  const result = Schema.decodeUnknownEither(schema, strict)(value)
  if (Either.isLeft(result)) {
    throw new Error(`${where}: ${ParseResult.TreeFormatter.formatErrorSync(result.left)}\n${JSON.stringify(value).slice(0, 300)}`)
  }
}

/** Every tool result answers a call made earlier in the session, and every call is answered before the next model call. */
const checkPairing = (session: Workloads.ReplaySession): void => {
  const open = new Set<string>()
  session.turns.forEach((turn, t) => {
    for (const m of turn.messages) {
      if (m.role === "assistant") {
        expect(open.size, `${session.id} turn ${t}: unanswered calls`).toBe(0)
        for (const call of m.tool_calls ?? []) open.add(call.id)
      }
      if (m.role === "tool") {
        expect(open.has(m.tool_call_id), `${session.id} turn ${t}: result without call`).toBe(true)
        open.delete(m.tool_call_id)
      }
    }
    expect(open.size, `${session.id} turn ${t}: the model is called with unanswered tool calls`).toBe(0)
  })
}

const all = () => [...Workloads.tauBenchSessions(), ...Workloads.sweAgentSessions()]

describe("Workloads", () => {
  it("loads the 8 bundled tau-bench sessions and 5 SWE-agent trajectories", () => {
    const tau = Workloads.tauBenchSessions()
    expect(tau).toHaveLength(8)
    expect(new Set(tau.map((s) => s.id)).size).toBe(8)
    expect(tau[0]!.tools).toHaveLength(14)
    expect(tau[0]!.system).toContain("Airline Agent Policy")
    expect(Workloads.tauBenchSession("tau-airline-3-0").turns).toHaveLength(30)
    expect(() => Workloads.tauBenchSession("tau-airline-0-0")).toThrow(/no tau-bench session tau-airline-0-0 .*tau-airline-44-3/)
    const swe = Workloads.sweAgentSessions()
    expect(swe).toHaveLength(5)
    expect(swe.every((s) => s.system.length > 0 && s.turns.length > 0)).toBe(true)
    const fc = swe.find((s) => s.id === "function_calling_simple")!
    expect(fc.tools.map((t) => t.function.name).length).toBeGreaterThan(0)
    expect(fc.turns.flatMap((t) => t.messages).some((m) => m.role === "tool")).toBe(true)
  })

  it("every message and tool decodes against the OpenAI contract, with no extra keys", () => {
    for (const session of all()) {
      session.tools.forEach((tool, i) => check(OpenAI.Tool, tool, `${session.id} tool ${i}`))
      session.turns.forEach((turn, t) => {
        turn.messages.forEach((m, i) => check(OpenAI.Message, m, `${session.id} turn ${t} message ${i}`))
        expect(turn.messages.length, `${session.id} turn ${t} is empty`).toBeGreaterThan(0)
      })
      checkPairing(session)
    }
  })

  it("every turn is a valid turn request in both formats", () => {
    for (const session of all()) {
      const anthropic = Workloads.toAnthropic(session)
      session.turns.forEach((turn, t) => {
        check(
          Turn.TurnRequest,
          {
            turnId: `${session.id}-${t}`,
            format: "openai",
            model: { provider: "openai", name: "gpt-4o" },
            system: session.system,
            tools: session.tools,
            messages: turn.messages,
          },
          `${session.id} turn ${t} (openai)`,
        )
        check(
          Turn.TurnRequest,
          {
            turnId: `${session.id}-${t}`,
            format: "anthropic",
            model: { provider: "anthropic", name: "claude-sonnet-4-5" },
            system: anthropic.system,
            tools: anthropic.tools,
            messages: anthropic.turns[t]!.messages,
          },
          `${session.id} turn ${t} (anthropic)`,
        )
      })
      anthropic.tools.forEach((tool, i) => check(Anthropic.Tool, tool, `${session.id} anthropic tool ${i}`))
    }
  })

  it("the Anthropic conversion keeps every tool call paired with its result", () => {
    for (const session of all()) {
      const anthropic = Workloads.toAnthropic(session)
      const uses = anthropic.turns.flatMap((t) => t.messages).flatMap((m) => (typeof m.content === "string" ? [] : m.content))
      const ids = (type: string, key: "id" | "tool_use_id") =>
        uses.filter((b) => b.type === type).map((b) => (b as Record<string, unknown>)[key])
      expect(ids("tool_result", "tool_use_id"), session.id).toEqual(ids("tool_use", "id"))
    }
  })

  it("splits turns at assistant messages and drops trailing messages", () => {
    const m = (role: string, content: string) => ({ role, content })
    const conversation = [
      m("user", "u1"),
      m("user", "u1b"),
      m("assistant", "a1"),
      m("tool", "t1"),
      m("user", "u2"),
      m("assistant", "a2"),
      m("assistant", "a3"),
      m("user", "trailing"),
    ]
    expect(Workloads.splitTurns(conversation).map((t) => t.messages.map((x) => x.content))).toEqual([
      ["u1", "u1b"],
      ["a1", "t1", "u2"],
      ["a2"],
    ])
    expect(Workloads.splitTurns([m("user", "no model call yet")])).toEqual([])
  })

  it("converts a hand-made session to Anthropic format", () => {
    const session: Workloads.ReplaySession = {
      id: "hand-made",
      format: "openai",
      system: "be brief",
      tools: [{ type: "function", function: { name: "get", parameters: { type: "object" } } }],
      turns: [
        { messages: [{ role: "user", content: "hi" }] },
        {
          messages: [
            {
              role: "assistant",
              content: "checking",
              tool_calls: [
                { id: "c1", type: "function", function: { name: "get", arguments: '{"id":1}' } },
                { id: "c2", type: "function", function: { name: "get", arguments: '{"id":2}' } },
              ],
            },
            { role: "tool", tool_call_id: "c1", content: "one" },
            { role: "tool", tool_call_id: "c2", content: "two" },
          ],
        },
      ],
    }
    const anthropic = Workloads.toAnthropic(session)
    expect(anthropic.system).toBe("be brief")
    expect(anthropic.tools).toEqual([{ name: "get", input_schema: { type: "object" } }])
    expect(anthropic.turns[1]!.messages).toEqual([
      {
        role: "assistant",
        content: [
          { type: "text", text: "checking" },
          { type: "tool_use", id: "c1", name: "get", input: { id: 1 } },
          { type: "tool_use", id: "c2", name: "get", input: { id: 2 } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "c1", content: "one" },
          { type: "tool_result", tool_use_id: "c2", content: "two" },
        ],
      },
    ])
  })

  it("plain-text SWE-agent observations are user messages", () => {
    const session = Workloads.sweAgentSessions().find((s) => s.id === "ctf_pwn_warmup")!
    const roles = session.turns.flatMap((t) => t.messages.map((m) => m.role))
    expect(roles).not.toContain("tool")
    expect(session.tools).toEqual([])
    expect(session.turns[1]!.messages.map((m) => m.role)).toEqual(["assistant", "user"])
  })

  it("loads the GitHub MCP catalog", () => {
    const catalog = Workloads.githubCatalog()
    expect(catalog.tools).toHaveLength(117)
    expect(catalog.tools.filter((t) => t.annotations?.readOnlyHint === true)).toHaveLength(58)
    const toolsets = new Set(catalog.toolsets.map((t) => t.id))
    expect(catalog.tools.every((t) => t.toolset !== undefined && toolsets.has(t.toolset))).toBe(true)
    catalog.tools.forEach((tool, i) => check(OpenAI.Tool, tool, `github tool ${i}`))
  })

  it("tests read the bundled samples whatever CTXD_DATA_DIR says; benches the full set, or an error naming it", () => {
    const saved = process.env.CTXD_DATA_DIR
    try {
      process.env.CTXD_DATA_DIR = "/nonexistent/ctxd-data"
      expect(Workloads.dataDir()).toMatch(/[/\\]examples[/\\]data$/)
      expect(Workloads.tauBenchSessions()).toHaveLength(8)
      expect(Workloads.optInDataDir()).toBe("/nonexistent/ctxd-data")
      expect(() => Workloads.fullDataDir()).toThrow(/not at \/nonexistent\/ctxd-data: set CTXD_DATA_DIR/)
      process.env.CTXD_DATA_DIR = Workloads.dataDir()
      expect(Workloads.fullDataDir()).toBe(Workloads.dataDir())
      process.env.CTXD_DATA_DIR = ""
      expect(Workloads.optInDataDir()).toBeUndefined()
    } finally {
      if (saved === undefined) delete process.env.CTXD_DATA_DIR
      else process.env.CTXD_DATA_DIR = saved
    }
  })

  const full = Workloads.optInDataDir()
  it.skipIf(full === undefined)("the full data set (opt-in: set CTXD_DATA_DIR) has 200 tau-bench sessions and 22 trajectories", () => {
    const tau = Workloads.tauBenchSessions(full)
    expect(new Set(tau.map((s) => s.id)).size).toBe(200)
    expect(Workloads.sweAgentSessions(full)).toHaveLength(22)
    for (const session of [...tau, ...Workloads.sweAgentSessions(full)]) checkPairing(session)
  })

  it("uniqueRoot gives fresh subject roots", () => {
    const roots = new Set(Array.from({ length: 100 }, () => TestNats.uniqueRoot()))
    expect(roots.size).toBe(100)
    for (const root of roots) expect(root).toMatch(/^t_[0-9a-f]{16}$/)
  })
})
