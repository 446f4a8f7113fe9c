/** The turn stages over the carry: order, the I/O they ask for, rejections, and what a commit changes. */
import { Plan, type WorkQueue } from "@ctxd/compactor"
import { CostModel, type Knowledge, Normalize, SessionLengths } from "@ctxd/context"
import { type Conversation, Knowledge as KnowledgeContract, type Turn } from "@ctxd/contracts"
import { KnowledgeStore } from "@ctxd/db"
import { LoopState } from "@ctxd/loop-detector"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as AssemblerConfig from "../src/AssemblerConfig.ts"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local, words } from "./Helpers.ts"
import * as SessionState from "../src/SessionState.ts"
import type * as Carry from "../src/turn/Carry.ts"
import * as TurnStages from "../src/turn/Turn.ts"

const config: AssemblerConfig.Config = AssemblerConfig.make()
const model = { provider: "openai", name: "gpt-4o" } as const

const request = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>): Turn.TurnRequest =>
  ({ turnId, format: "openai", model, system: "Be brief.", messages }) as unknown as Turn.TurnRequest

let clock = 0

/** Runs a turn's stages on `state` (10 s after the previous one), answering the count; returns the outcome and the needs asked for. */
const runStages = (state: SessionState.SessionState, req: Turn.TurnRequest) => {
  const needs: Array<Carry.Need["_tag"]> = []
  let carry = TurnStages.begin({
    config,
    tenant: "acme",
    session: "s1",
    request: req,
    state,
    knowledge: [],
    local,
    thresholds: undefined,
    now: (clock += 10_000),
  })
  let outcome = TurnStages.run(carry)
  while (outcome._tag === "Need") {
    needs.push(outcome.need._tag)
    if (outcome.need._tag !== "Count") throw new Error(`unexpected need ${outcome.need._tag}`)
    carry = { ...outcome.carry, answers: { count: InProcessTurns.countLocally(local)(outcome.need.input) } }
    outcome = TurnStages.run(carry, outcome.at)
  }
  return { outcome, needs }
}

const call = (id: string) => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }],
})
const result = (id: string) => ({ role: "tool", tool_call_id: id, content: "a b c" })

describe("turn stages", () => {
  it("runs in order, asks for the count once, and builds a reply with every stage's report", () => {
    const { outcome, needs } = runStages(SessionState.empty("o200k_base"), request("t1", [{ role: "user", content: "hi" }]))
    expect(needs).toEqual(["Count"])
    expect(outcome._tag).toBe("Done")
    if (outcome._tag !== "Done") return
    expect(Object.keys(outcome.carry).filter((k) => k !== "inputs" && k !== "answers")).toEqual([
      "tools",
      "count",
      "loop",
      "compaction",
      "memory",
      "prompt",
      "reply",
    ])
    expect(outcome.reply.report.stages?.map((s) => s.stage)).toEqual([
      "window",
      "compress",
      "mask",
      "budget",
      "prune",
      "thinking",
      "render",
      "proactive",
    ])
    expect(outcome.reply.report.loop?.policy).toBe("nudge")
  })

  it("sends the same tool list object while the selection is the same (what is cached by it downstream answers from memory)", () => {
    const tools = [
      { type: "function", function: { name: "ls", parameters: { type: "object", properties: {} } } },
      { type: "function", function: { name: "cat", parameters: { type: "object", properties: {} } } },
    ]
    const sentBy = (req: Turn.TurnRequest, normalizedTools: ReadonlyArray<Conversation.Tool>) => {
      const normalized = { ...Normalize.request(req), tools: normalizedTools }
      const carry = TurnStages.begin({
        config,
        tenant: "acme",
        session: "s1",
        request: req,
        state: SessionState.empty("o200k_base"),
        knowledge: [],
        local,
        thresholds: undefined,
        now: 0,
        normalized,
      })
      const outcome = TurnStages.run(carry)
      return (outcome._tag === "Done" ? outcome.carry : outcome._tag === "Need" ? outcome.carry : carry).tools!.sent
    }
    const req = { ...request("t1", [{ role: "user", content: "hi" }]), tools } as unknown as Turn.TurnRequest
    // the prefix cache hands the same normalized tools to every turn
    const cached = Normalize.request(req).tools
    const first = sentBy(req, cached)
    expect(sentBy({ ...req, turnId: "t2" } as Turn.TurnRequest, cached)).toBe(first)
    expect(first.map((t) => t.name)).toEqual(["cat", "ls"])
    // other tools: another list
    const fewer = sentBy(req, cached.slice(1))
    expect(fewer).not.toBe(first)
    expect(fewer.map((t) => t.name)).toEqual(["cat"])
  })

  it("rejects an empty first turn, and a result for an unknown call as a pairing error", () => {
    expect(runStages(SessionState.empty("o200k_base"), request("t1", [])).outcome).toMatchObject({
      _tag: "Rejected",
      path: "messages",
      pairing: false,
    })
    expect(
      runStages(SessionState.empty("o200k_base"), request("t1", [{ role: "user", content: "x" }, result("nope")])).outcome,
    ).toMatchObject({
      _tag: "Rejected",
      path: "messages[1]",
      pairing: true,
    })
  })

  it.each([
    ["anthropic", "messages", [{ role: "user", content: "" }]],
    ["anthropic", "messages", [{ role: "user", content: [] }]],
    ["openai", "messages", [{ role: "user", content: "" }]],
    ["openai-responses", "input", [{ role: "user", content: "" }]],
    ["gemini", "contents", [{ role: "user", parts: [] }]],
    ["gemini", "contents", [{ role: "user", parts: [{ text: "" }] }]],
  ] as const)("rejects a %s first turn whose messages carry no content (path %s)", (format, field, history) => {
    const req = { turnId: "t1", format, model, system: "Be brief.", [field]: history } as unknown as Turn.TurnRequest
    expect(runStages(SessionState.empty("o200k_base"), req).outcome).toMatchObject({ _tag: "Rejected", path: field, pairing: false })
  })

  it("a commit folds each message into the loop state once", () => {
    const state = SessionState.empty("o200k_base")
    const turns = [
      [{ role: "user", content: "list it" }, call("c1")],
      [result("c1"), call("c2")],
      [result("c2"), call("c3")],
    ]
    turns.forEach((messages, i) => {
      const { outcome } = runStages(state, request(`t${i}`, messages))
      if (outcome._tag !== "Done") throw new Error(outcome._tag)
      SessionState.advance(state, TurnStages.committed(outcome.carry))
    })
    const once = LoopState.observe(
      LoopState.initial(),
      state.messages.map((m) => m.message),
      0,
    )
    expect(state.loop).toEqual(once)
    expect(state.lastSeq).toBe(6)
  })

  it("InProcessTurns keeps the session between turns and answers like the worker", async () => {
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const first = await turns.turn("acme", "s1", request("t1", [{ role: "user", content: "list it" }, call("c1")]))
    const second = await turns.turn("acme", "s1", request("t2", [result("c1")]))
    expect(first.report.messages.stored).toBe(2)
    expect(second.report.messages.stored).toBe(3)
    await expect(turns.turn("acme", "s2", request("t1", []))).rejects.toBeInstanceOf(InProcessTurns.Rejected)
  })

  it("a workspace bundle's sections (read by the shell) are the turn's system; without them the request is refused", async () => {
    const bundle = { "acme-bot": { "IDENTITY.md": "You are Wile.", "SOUL.md": "Be patient." } }
    const withWorkspace = (turnId: string) =>
      ({ ...request(turnId, [{ role: "user", content: "hi" }]), system: { workspace: "acme-bot", cache: "1h" } }) as Turn.TurnRequest
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), workspaces: bundle })
    const reply = await turns.turn("acme", "s1", withWorkspace("t1"))
    const body = reply.request as { messages: ReadonlyArray<{ role: string; content: unknown }> }
    expect(JSON.stringify(body.messages.filter((m) => m.role === "system"))).toContain("You are Wile.")
    expect(JSON.stringify(body.messages.filter((m) => m.role === "system"))).toContain("Be patient.")
    const without = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    await expect(without.turn("acme", "s1", withWorkspace("t1"))).rejects.toMatchObject({ path: "system.workspace" })
  })

  describe("restorable masking: recall", () => {
    // turns 10 s apart under a 5 s cache TTL: every turn finds the cache cold, so offering recall
    // (a change of the tool list) is free at once; on a warm cache it waits (tested below)
    const options = { maskKeep: 1, maskBatchTokens: 100, cacheTtlSeconds: 5 }
    const masking = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>): Turn.TurnRequest =>
      ({
        ...request(turnId, messages),
        tools: [{ type: "function", function: { name: "ls", parameters: { type: "object" } } }],
        options,
      }) as Turn.TurnRequest
    const big = (i: number) => ({ role: "tool", tool_call_id: `c${i}`, content: `listing ${i} `.repeat(30) })
    const recallOf = (id: string, step: number) => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name: "recall", arguments: JSON.stringify({ step }) } }],
    })
    type Body = { tools: Array<{ function: { name: string } }>; messages: Array<{ role: string; content: string; tool_call_id?: string }> }
    const names = (reply: Turn.TurnReply) => (reply.request as unknown as Body).tools.map((t) => t.function.name)
    const messagesOf = (reply: Turn.TurnReply) => (reply.request as unknown as Body).messages

    it("offers recall from the turn that first masks, answers it on the next turn from the stored original, and keeps it offered", async () => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
      let clock = 0
      const send = (req: Turn.TurnRequest) => turns.turn("acme", "r1", req, undefined, (clock += 10_000))
      const replies: Array<Turn.TurnReply> = []
      replies.push(await send(masking("t0", [{ role: "user", content: "list it" }, call("c1")])))
      for (let i = 1; i <= 3; i++) replies.push(await send(masking(`t${i}`, [big(i), call(`c${i + 1}`)])))
      const firstMasked = replies.findIndex((r) => (r.report.masking?.masked ?? 0) > 0)
      expect(firstMasked).toBeGreaterThan(0)
      // not offered before anything is masked; offered in the very turn that masks (one change of the tool list)
      for (const r of replies.slice(0, firstMasked)) expect(names(r)).not.toContain("recall")
      for (const r of replies.slice(firstMasked)) expect(names(r)).toContain("recall")
      const last = replies.at(-1)!
      const reference = messagesOf(last).find((m) => m.role === "tool" && m.content.startsWith("[ls: "))!
      expect(reference.content).toMatch(/^\[ls: ok, \d+ tokens — recall\(3\)\]$/)

      const recalled = await send(masking("t4", [big(4), recallOf("r1", 3)]))
      expect(recalled.report.virtualCalls).toEqual([{ tool: "recall", callId: "r1", args: { step: 3 }, ok: true }])
      const answer = messagesOf(recalled).at(-1)!
      expect(answer).toMatchObject({ role: "tool", tool_call_id: "r1" })
      expect(answer.content).toBe(`[Recalled step 3: ls — ok]\n${"listing 1 ".repeat(30)}`)
      // stored like any other message: the call and ctxd's answer
      expect(recalled.report.messages.stored).toBe(last.report.messages.stored + 3)
      // the masked reference stays as it was (the cached prefix before it is untouched)
      expect(messagesOf(recalled).filter((m) => m.content === reference.content)).toHaveLength(1)

      const unknown = await send(masking("t5", [recallOf("r2", 999)]))
      expect(unknown.report.virtualCalls).toEqual([{ tool: "recall", callId: "r2", args: { step: 999 }, ok: false }])
      expect(messagesOf(unknown).at(-1)!.content).toContain("no stored message at step 999")
      const after = await send(masking("t6", [{ role: "user", content: "thanks" }]))
      expect(names(after)).toEqual(names(last))
      // the stored answer is a tool result like any other: older than the last K, it is masked in turn
      const answerStep = recalled.report.messages.lastSentSeq!
      expect(messagesOf(after).find((m) => m.tool_call_id === "r1")!.content).toMatch(
        new RegExp(`^\\[recall: ok, \\d+ tokens — recall\\(${answerStep}\\)\\]$`),
      )
    })

    it("on a warm cache, waits to offer recall until the prefix is lost anyway", async () => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
      let at = 0
      const warm = { ...options, cacheTtlSeconds: 300 }
      const send = (id: string, messages: ReadonlyArray<Record<string, unknown>>) =>
        turns.turn("acme", "w1", { ...masking(id, messages), options: warm } as Turn.TurnRequest, undefined, (at += 1_000))
      const replies: Array<Turn.TurnReply> = [await send("t0", [{ role: "user", content: "list it" }, call("c1")])]
      for (let i = 1; i <= 3; i++) replies.push(await send(`t${i}`, [big(i), call(`c${i + 1}`)]))
      expect(replies.some((r) => (r.report.masking?.masked ?? 0) > 0)).toBe(true)
      for (const r of replies) expect(names(r)).not.toContain("recall")
      // the cache goes cold (10 minutes later): offered now, for free
      at += 600_000
      expect(names(await send("t4", [big(4), call("c5")]))).toContain("recall")
    })

    it("caps a recalled result at maskBatchTokens, and is rebuilt from the stored history by another worker", () => {
      const state = SessionState.empty("o200k_base")
      const turn = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>, on = state) => {
        const { outcome } = runStages(on, masking(turnId, messages))
        if (outcome._tag !== "Done") throw new Error(outcome._tag)
        SessionState.advance(on, TurnStages.committed(outcome.carry))
        return outcome
      }
      turn("t0", [{ role: "user", content: "list it" }, call("c1")])
      for (let i = 1; i <= 3; i++) turn(`t${i}`, [{ ...big(i), content: `listing ${i} `.repeat(i === 1 ? 400 : 80) }, call(`c${i + 1}`)])
      expect(state.recall).toBe(true)
      // another worker: only the stored rows
      const other = SessionState.empty("o200k_base")
      SessionState.advance(other, { _tag: "Loaded", rows: state.messages })
      const done = turn("t4", [big(4), recallOf("r1", 3)], other)
      expect(done.carry.tools!.sent.map((t) => t.name)).toContain("recall")
      expect(other.recall).toBe(true)
      const text = messagesOf(done.reply).at(-1)!.content
      expect(words(text)).toBeLessThanOrEqual(options.maskBatchTokens)
      expect(text).toMatch(/^\[Recalled step 3: ls — ok\]\nlisting 1 /)
      expect(text).toMatch(/\[recall: cut to about 100 of \d+ tokens; the full output stays stored\]$/)
    })

    it("leaves a runtime tool named recall to the runtime", async () => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
      const own = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>) =>
        ({
          ...masking(turnId, messages),
          tools: [{ type: "function", function: { name: "recall", parameters: { type: "object" } } }],
        }) as Turn.TurnRequest
      await turns.turn("acme", "r3", own("t0", [{ role: "user", content: "go" }]))
      const reply = await turns.turn("acme", "r3", own("t1", [recallOf("x1", 1)]))
      expect(reply.report.virtualCalls).toEqual([])
      expect(names(reply)).toEqual(["recall"])
    })
  })

  it("the cache planner's knobs: expectedTurns decides whether a mask edit is made, cacheTtlSeconds when the cache is cold", async () => {
    // large results between long calls: masking wants to advance; the edit re-writes the calls after it
    const big = "x".repeat(4_000)
    const turnsOf = (options: Record<string, unknown>) => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
      const send = (k: number, messages: ReadonlyArray<Record<string, unknown>>, at: number) =>
        turns.turn(
          "acme",
          "s1",
          // the rules of rent-or-buy and expected turns alone (the savings ledger: CacheEdits.test.ts)
          {
            ...request(`t${k}`, messages),
            options: { maskKeep: 1, maskBatchTokens: 200, cacheEdits: "expected", ...options },
          } as Turn.TurnRequest,
          undefined,
          at,
        )
      return send
    }
    const call = (id: string) => ({
      role: "assistant",
      content: big,
      tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }],
    })
    const play = async (options: Record<string, unknown>, gapMs: number) => {
      const send = turnsOf(options)
      await send(0, [{ role: "user", content: "go" }, call("c0")], 0)
      let last
      for (let k = 1; k < 6; k++)
        last = await send(k, [{ role: "tool", tool_call_id: `c${k - 1}`, content: big }, call(`c${k}`)], k * gapMs)
      return last!.report.cache
    }
    expect((await play({ expectedTurns: 0 }, 1_000)).deferred).toEqual(["mask"])
    expect((await play({ expectedTurns: 10_000 }, 1_000)).deferred).toEqual([])
    // 10 s between turns: warm under the default 300 s TTL, cold under a 5 s one (every edit made, free)
    expect((await play({ expectedTurns: 0 }, 10_000)).reason).not.toBe("ttl_expired")
    expect(await play({ expectedTurns: 0, cacheTtlSeconds: 5 }, 10_000)).toMatchObject({ reason: "ttl_expired", deferred: [] })
  })

  it("chooses the 1-hour cache for a session that pauses 5-60 minutes between turns, 5 minutes for one that does not", async () => {
    const system = "Policy. ".repeat(25_000) // about 50k tokens: a cold re-write is costly
    // the tier's own rule (under `guarded` a dearer tier also waits for the session's savings; below)
    const play = async (gapMs: number, options: Record<string, unknown> = { cacheEdits: "expected" }) => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
      const replies: Array<Turn.TurnReply> = []
      for (let k = 0; k < 6; k++) {
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
          model: { provider: "anthropic", name: "claude-sonnet-4-5" },
          system,
          messages,
          options,
        }
        replies.push(await turns.turn("acme", "ttl", req as unknown as Turn.TurnRequest, undefined, k * gapMs))
      }
      return replies
    }
    const marks = (reply: Turn.TurnReply) => [...JSON.stringify(reply.request).matchAll(/"cache_control":\{[^}]*\}/g)].map((m) => m[0])
    // 10 minutes apart: once three gaps are seen (the fifth turn) every breakpoint is 1 h, and the
    // next 10-minute pause no longer finds the cache cold
    const paused = await play(600_000)
    expect(paused.slice(1, 5).map((r) => r.report.cache.reason)).toEqual(["ttl_expired", "ttl_expired", "ttl_expired", "ttl_expired"])
    expect(paused.map((r) => r.report.cache.ttlSeconds)).toEqual([300, 300, 300, 300, 3600, 3600])
    expect(paused.at(-1)!.report.cache.reason).toBe("append")
    for (const mark of marks(paused.at(-1)!)) expect(mark).toContain('"ttl":"1h"')
    // 10 seconds apart: 5 minutes throughout
    const busy = await play(10_000)
    expect(busy.map((r) => r.report.cache.ttlSeconds)).toEqual([300, 300, 300, 300, 300, 300])
    expect(marks(busy.at(-1)!).some((m) => m.includes("1h"))).toBe(false)
    // options.cacheTtlSeconds pins the TTL: no choice is made
    // guarded (the default): every prompt so far is the whole history, nothing saved pays for 2× writes
    const guarded = await play(600_000, {})
    expect(guarded.map((r) => r.report.cache.ttlSeconds)).toEqual([300, 300, 300, 300, 300, 300])
    const pinned = await play(600_000, { cacheEdits: "expected", cacheTtlSeconds: 300 })
    expect(pinned.at(-1)!.report.cache).toMatchObject({ ttlSeconds: 300, reason: "ttl_expired" })
    expect(marks(pinned.at(-1)!).some((m) => m.includes("1h"))).toBe(false)
  })

  it("swaps in a summary that landed when it pays back in the turns to come, holds it otherwise, swaps at once when cold", async () => {
    const body = "log line ".repeat(400) // about 900 tokens a message
    const play = async (gapMs: number, options: Record<string, unknown> = {}) => {
      const turns = InProcessTurns.make({
        local,
        count: InProcessTurns.countLocally(local),
        thresholds: { compactAtPct: 0.95, softPct: 0.2, tailKeepTokens: 1_000, tailMaxPct: 0.3, minFoldPct: 0.01 },
        // a summary of everything but the last two messages, made at once, landing on the next turn
        compact: (_job, stored) =>
          Promise.resolve({
            id: stored.length,
            coversFromSeq: 1,
            coversToSeq: stored.at(-3)!.seq,
            text: "Summary: the logs were read.",
            mode: "one_shot",
            depth: 1,
          }),
      })
      const replies: Array<Turn.TurnReply> = []
      for (let k = 0; k < 14; k++) {
        const messages =
          k === 0
            ? [{ role: "user", content: body }]
            : [
                { role: "assistant", content: `noted ${k}` },
                { role: "user", content: body },
              ]
        const model = { provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 40_000, maxOutputTokens: 4_000 }
        const req = { turnId: `t${k}`, format: "anthropic", model, system: "Be brief.", messages, options }
        replies.push(await turns.turn("acme", "swap", req as unknown as Turn.TurnRequest, undefined, k * gapMs))
      }
      return replies
    }
    const summarized = (r: Turn.TurnReply) => r.report.compaction?.summary?.coversToSeq ?? 0
    // a session going on for 10 more turns: swapped in on the turn it lands, the prefix re-written once
    const going = await play(2_000, { expectedTurns: 10 })
    const landed = going.findIndex((r) => summarized(r) > 0)
    expect(landed).toBeGreaterThan(0)
    expect(going[landed]!.report.cache.reason).toBe("summary")
    expect(going.some((r) => r.report.cache.summaryDeferred === true)).toBe(false)
    // a session expected to end now never earns the re-write: the previous view is sent and kept
    const ending = await play(2_000, { expectedTurns: 0 })
    expect(ending.slice(landed).every((r) => r.report.cache.summaryDeferred === true && summarized(r) === 0)).toBe(true)
    expect(ending.slice(landed).every((r) => r.report.cache.reason === "append")).toBe(true)
    // unless the cache is cold (2 hours apart: past even the 1-hour TTL): then the swap is free
    const cold = await play(7_200_000, { expectedTurns: 0 })
    expect(summarized(cold[landed]!)).toBeGreaterThan(0)
    expect(cold.some((r) => r.report.cache.summaryDeferred === true)).toBe(false)
  })

  it("a provider compaction supersedes the live summary; later summaries fold only what follows it", async () => {
    const thresholds = { compactAtPct: 0.95, softPct: 0.2, tailKeepTokens: 1_000, tailMaxPct: 0.3, minFoldPct: 0.01 }
    const jobs: Array<WorkQueue.Job> = []
    const turns = InProcessTurns.make({
      local,
      count: InProcessTurns.countLocally(local),
      thresholds,
      // summaries cut as the compactor cuts them, under the job's format
      compact: (job, stored, live) => {
        jobs.push(job)
        const cut = Plan.planCut(stored, live, 36_000, thresholds, { format: job.format })
        if (cut._tag === "NoBoundary") return Promise.resolve(undefined)
        return Promise.resolve({
          id: stored.length,
          coversFromSeq: cut.coversFromSeq,
          coversToSeq: cut.coversToSeq,
          text: `Summary ${cut.coversFromSeq}-${cut.coversToSeq}.`,
          mode: "one_shot",
          depth: 1,
        })
      },
    })
    const body = (k: number) => `#${k}# ${"log line ".repeat(400)}`
    const block = { type: "compaction", content: "The provider's summary of turns 0-9." }
    const BOUNDARY_TURN = 10
    const replies: Array<Turn.TurnReply> = []
    for (let k = 0; k < 24; k++) {
      const reply = k === BOUNDARY_TURN ? [block, { type: "text", text: `noted ${k}` }] : `noted ${k}`
      const messages =
        k === 0
          ? [{ role: "user", content: body(k) }]
          : [
              { role: "assistant", content: reply },
              { role: "user", content: body(k) },
            ]
      const model = { provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 40_000, maxOutputTokens: 4_000 }
      const req = { turnId: `t${k}`, format: "anthropic", model, system: "Be brief.", messages, options: { expectedTurns: 10 } }
      replies.push(await turns.turn("acme", "provider", req as unknown as Turn.TurnRequest, undefined, k * 2_000))
    }
    const boundarySeq = 2 * BOUNDARY_TURN // turn k stores seqs 2k (assistant) and 2k + 1 (user)
    // before it, a ctxd summary from the start was live
    expect(replies.slice(0, BOUNDARY_TURN).some((r) => r.report.compaction?.summary?.coversFromSeq === 1)).toBe(true)
    const at = replies[BOUNDARY_TURN]!
    expect(at.report.providerCompaction).toEqual({
      format: "anthropic",
      seq: boundarySeq,
      notSent: boundarySeq - 1,
      summarySuperseded: true,
    })
    expect(at.report.compaction?.summary).toBeNull()
    for (const r of replies.slice(BOUNDARY_TURN)) {
      const sent = r.request["messages"] as Array<{ role: string; content: Array<Record<string, unknown>> }>
      expect(sent[0]!.content[0]).toEqual(block)
      for (let k = 0; k < BOUNDARY_TURN; k++) expect(JSON.stringify(r.request)).not.toContain(`#${k}#`)
    }
    // every job from then on starts after the boundary, under the request's format
    const after = jobs.filter((j) => j.afterSeq >= boundarySeq)
    expect(after.length).toBeGreaterThan(0)
    expect(after.every((j) => j.format === "anthropic")).toBe(true)
    // and a later summary folds only what follows it, after the boundary message
    const later = replies.slice(BOUNDARY_TURN).find((r) => r.report.compaction?.summary != null)
    expect(later?.report.compaction?.summary?.coversFromSeq).toBe(boundarySeq + 1)
    const sent = later!.request["messages"] as Array<{ role: string; content: Array<Record<string, unknown>> }>
    expect(JSON.stringify(sent[1])).toContain(`Summary ${boundarySeq + 1}-`)
  })

  it("holds a changed knowledge index back until the prefix is re-written anyway (a cold cache), at most an hour", async () => {
    const play = async (gapsMs: ReadonlyArray<number>, system: string, changeAt: number) => {
      const knowledge = KnowledgeStore.makeMemory()
      const add = (doc: Knowledge.Doc) => Effect.runSync(knowledge.add("acme", KnowledgeContract.DEFAULT_AGENT, doc))
      add({ id: "refunds", title: "Refund policy", text: "Refunds within 30 days." })
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), knowledge })
      const sent: Array<string> = []
      let at = 0
      for (const [k, gap] of gapsMs.entries()) {
        if (k === changeAt) add({ id: "baggage", title: "Baggage allowance", text: "Two bags." })
        at += gap
        const messages =
          k === 0
            ? [{ role: "user", content: "hello" }]
            : [
                { role: "assistant", content: `answer ${k}` },
                { role: "user", content: `question ${k}` },
              ]
        // the 1-hour tier by its own rule (not waiting for the session's savings)
        const req = {
          turnId: `t${k}`,
          format: "anthropic",
          model: { provider: "anthropic", name: "claude-sonnet-4-5" },
          system,
          messages,
          options: { cacheEdits: "expected" },
        }
        const reply = await turns.turn("acme", "kb", req as unknown as Turn.TurnRequest, undefined, at)
        sent.push(`${JSON.stringify(reply.request).includes("Baggage allowance") ? "new" : "old"} ${reply.report.cache.reason}`)
      }
      return sent
    }
    // 2 s apart, then 10 minutes (cold under 5 minutes): held while warm, sent with the cold re-write
    expect(await play([0, 2_000, 2_000, 2_000, 2_000, 2_000, 600_000, 2_000], "Be brief.", 4)).toEqual([
      "old first_turn",
      "old append",
      "old append",
      "old append",
      "old append",
      "old append",
      "new ttl_expired",
      "new append",
    ])
    // 30 minutes apart with a large prompt: the 1-hour cache (from the fifth turn) keeps it warm, so
    // an index changed at the sixth waits its hour
    const large = "Policy. ".repeat(25_000)
    const hourly = await play(
      Array.from({ length: 9 }, (_, k) => (k === 0 ? 0 : 1_800_000)),
      large,
      5,
    )
    expect(hourly.slice(4)).toEqual(["old ttl_expired", "old append", "old append", "new system", "new append"])
  })

  describe("the configured price table (AssemblerConfig.prices) drives the cache planner", () => {
    // the scenario above: large results between long calls, turns 1 s apart, a long session expected
    const big = "x".repeat(4_000)
    const call = (id: string) => ({
      role: "assistant",
      content: big,
      tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }],
    })
    const play = async (prices?: CostModel.PriceTable) => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) }, prices === undefined ? {} : { prices })
      const send = (k: number, messages: ReadonlyArray<Record<string, unknown>>) =>
        turns.turn(
          "acme",
          "s1",
          {
            ...request(`t${k}`, messages),
            options: { maskKeep: 1, maskBatchTokens: 200, expectedTurns: 10_000, cacheEdits: "expected" },
          } as Turn.TurnRequest,
          undefined,
          k * 1_000,
        )
      const caches = [(await send(0, [{ role: "user", content: "go" }, call("c0")])).report.cache]
      for (let k = 1; k < 6; k++)
        caches.push((await send(k, [{ role: "tool", tool_call_id: `c${k - 1}`, content: big }, call(`c${k}`)])).report.cache)
      return caches
    }

    it("a huge cache-write premium holds back the mask edit the built-in prices make", async () => {
      const builtIn = await play()
      expect(builtIn.at(-1)!.deferred).toEqual([])
      expect(builtIn.some((c) => c.reason === "mask")).toBe(true)
      const tiers = [{ name: "in_memory", ttlSeconds: 300, writeMultiplier: 1_000 }]
      const costly = await play(CostModel.make([{ match: "gpt-4o", tiers }]))
      expect(costly.at(-1)!.deferred).toEqual(["mask"])
      expect(costly.some((c) => c.reason === "mask")).toBe(false)
    })

    it("an enormous minimum cacheable prefix: no cache read expected", async () => {
      const builtIn = await play()
      expect(builtIn.at(-1)!.expectedReadTokens).toBeGreaterThan(0)
      const never = await play(CostModel.make([{ match: "gpt-4o", minCacheableTokens: 100_000_000 }]))
      expect(never.map((c) => c.expectedReadTokens)).toEqual(never.map(() => 0))
    })

    it("a configured 24h tier reaches the Responses body (prompt_cache_retention)", async () => {
      const send = async (prices?: CostModel.PriceTable) => {
        const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) }, prices === undefined ? {} : { prices })
        const req = {
          turnId: "t0",
          format: "openai-responses",
          model: { provider: "openai", name: "gpt-4o" },
          input: [{ type: "message", role: "user", content: "hi" }],
        }
        return (await turns.turn("acme", "r24", req as unknown as Turn.TurnRequest, undefined, 0)).request
      }
      // gpt-4o's built-in row has no 24h tier
      expect((await send())["prompt_cache_retention"]).toBeUndefined()
      const tiers = [
        { name: "in_memory", ttlSeconds: 300, writeMultiplier: 1 },
        { name: "24h", ttlSeconds: 86_400, writeMultiplier: 1 },
      ]
      expect((await send(CostModel.make([{ match: "gpt-4o", tiers }])))["prompt_cache_retention"]).toBe("24h")
    })

    it("a row for another model changes nothing", async () => {
      expect(await play(CostModel.make([{ match: "claude", minCacheableTokens: 100_000_000 }]))).toEqual(await play())
    })
  })

  describe("expected turns from the agent's history of session lengths", () => {
    // gpt-5 (cache reads at 0.1×): one large result, then a long reply after it, then short exchanges.
    // Once the result is masked-to-be, the edit re-writes the long reply after it: it is earned
    // (rent or buy) after a few turns, and then pays back only if the session goes on long enough.
    const call = (id: string) => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }],
    })
    const script: ReadonlyArray<ReadonlyArray<Record<string, unknown>>> = [
      [{ role: "user", content: "go" }, call("c0")],
      [
        { role: "tool", tool_call_id: "c0", content: "x".repeat(8_000) },
        { role: "assistant", content: "y".repeat(4_000) },
      ],
      [{ role: "user", content: "next" }, call("c1")],
      [
        { role: "tool", tool_call_id: "c1", content: "ok" },
        { role: "assistant", content: "ok" },
      ],
      ...Array.from({ length: 10 }, () => [
        { role: "user", content: "more" },
        { role: "assistant", content: "ok" },
      ]),
    ]
    /** 30 sessions of `turns` turns for tenant acme's agent `coder`, nothing for anyone else. */
    const coderSessions = (turns: number) => (tenant: string, agent: string) =>
      tenant === "acme" && agent === "coder" ? SessionLengths.fromCounts([{ turns, sessions: 30 }]) : undefined
    /** The script's turns, 1 s apart (the cache stays warm); each turn's cache report. */
    const play = async (lengths: InProcessTurns.Ports["lengths"], options: Record<string, unknown>) => {
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), lengths })
      const reports: Array<Turn.TurnReply["report"]["cache"]> = []
      for (const [k, messages] of script.entries()) {
        const req = {
          ...request(`t${k}`, messages),
          model: { provider: "openai", name: "gpt-5" },
          options: { maskKeep: 1, cacheEdits: "expected", ...options },
        } as Turn.TurnRequest
        reports.push((await turns.turn("acme", "s1", req, undefined, k * 1_000)).report.cache)
      }
      return { masked: reports.findIndex((r) => r.reason === "mask"), at: (k: number) => reports[k]!.deferred }
    }

    it("a history of long sessions makes the edit sooner than the rule of thumb; of short ones, later", async () => {
      // the rule of thumb (half the turns so far) holds the mask edit until turn 10
      const rule = await play(undefined, { agent: "coder" })
      expect(rule.masked).toBe(10)
      expect(rule.at(8)).toEqual(["mask"])
      // the coder's sessions go on for 200 turns: it pays back, and is made as soon as it is earned
      const long = await play(coderSessions(200), { agent: "coder" })
      expect(long.masked).toBe(8)
      expect(long.at(8)).toEqual([])
      // another agent of the tenant has no history: the rule of thumb
      expect((await play(coderSessions(200), { agent: "reviewer" })).masked).toBe(10)
      // the coder's sessions end at 13 turns: too little is left for the edit to pay back, until this
      // session outlives them all (then the history says nothing, and the rule of thumb stands again)
      expect((await play(coderSessions(13), { agent: "coder" })).masked).toBe(13)
    })

    it("options.expectedTurns still overrides the history", async () => {
      expect((await play(coderSessions(200), { agent: "coder", expectedTurns: 0 })).masked).toBe(-1)
      expect((await play(coderSessions(12), { agent: "coder", expectedTurns: 10_000 })).masked).toBe(8)
    })
  })
})
