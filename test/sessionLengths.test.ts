// The agents' histories of session lengths, through a real worker: a commit
// records its session's length (`ctxd_session_lengths`, in the commit's own
// statement) whenever the length leaves its bucket of the histogram (every
// turn below 64) or the agent changes, and a tenant's agent whose past
// sessions went on long gets a prompt edit sooner than the rule of thumb
// (half the turns so far) allows.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  // 4 characters per token, as the pure turn tests count
  h = await Harness.start({ CTXD_TOKEN_BACKEND: "heuristic" })
  // 30 past sessions of 200 turns for acme's agent `coder`, before its first turn (the worker caches what it reads)
  await h.sql(
    `WITH s AS (INSERT INTO ctxd_sessions (tenant, session, last_seq) SELECT 'acme', 'past' || n, 400 FROM generate_series(1, 30) n RETURNING id)
     INSERT INTO ctxd_session_lengths (session_id, tenant, agent, turns) SELECT id, 'acme', 'coder', 200 FROM s`,
  )
})
afterAll(async () => {
  await h?.close()
})

const call = (id: string) => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }],
})

/** One large result with a long reply after it, then short exchanges (as in the assembler's turn tests). */
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

/** Plays the script as `agent` in `session` (turns back to back: the cache stays warm); each turn's `report.cache`. */
const play = async (session: string, agent: string) => {
  const reports: Array<{ reason: string; deferred: ReadonlyArray<string> }> = []
  for (const [k, messages] of script.entries()) {
    const reply = await h.request(h.turnSubject("acme", session), {
      turnId: `t${k}`,
      format: "openai",
      model: { provider: "openai", name: "gpt-5" },
      tools: [{ type: "function", function: { name: "ls", parameters: { type: "object" } } }],
      messages,
      // the expected-turns rule alone: the savings ledger (guarded, the default) would hold the edit
      options: { agent, maskKeep: 1, cacheEdits: "expected" },
    })
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
    reports.push(reply.report.cache)
  }
  return reports
}

it("records each session's length at commit, and a long history makes the mask edit sooner", async () => {
  const rule = await play("fresh-agent", "default")
  const long = await play("coder-session", "coder")
  const masked = (reports: ReadonlyArray<{ reason: string }>) => reports.findIndex((r) => r.reason === "mask")
  expect(masked(rule)).toBeGreaterThan(0)
  expect(masked(long)).toBeGreaterThan(0)
  expect(masked(long)).toBeLessThan(masked(rule))
  // the turn the coder's edit was made, the rule of thumb held it back
  expect(rule[masked(long)]!.deferred).toEqual(["mask"])
  expect(long[masked(long)]!.deferred).toEqual([])

  // each session's turns (assistant messages stored) as of its last commit, under its agent
  const rows = await h.sql<{ session: string; agent: string; turns: number }>(
    `SELECT s.session, l.agent, l.turns FROM ctxd_session_lengths l JOIN ctxd_sessions s ON s.id = l.session_id
     WHERE s.session IN ('fresh-agent', 'coder-session') ORDER BY s.session`,
  )
  expect(rows).toEqual([
    { session: "coder-session", agent: "coder", turns: 14 },
    { session: "fresh-agent", agent: "default", turns: 14 },
  ])
})

it("a long session's length is recorded once per bucket of the histogram, an agent change at once", async () => {
  const lengthOf = async (session: string) =>
    (
      await h.sql<{ agent: string; turns: number }>(
        `SELECT l.agent, l.turns FROM ctxd_session_lengths l JOIN ctxd_sessions s ON s.id = l.session_id WHERE s.tenant = 'acme' AND s.session = $1`,
        [session],
      )
    )[0]
  const turn = async (k: number, agent: string) => {
    const reply = await h.request(h.turnSubject("acme", "long"), {
      turnId: `t${k}`,
      format: "openai",
      model: { provider: "openai", name: "gpt-5" },
      messages:
        k === 0
          ? [
              { role: "user", content: "go" },
              { role: "assistant", content: "ok" },
            ]
          : [
              { role: "user", content: `more ${k}` },
              { role: "assistant", content: "ok" },
            ],
      options: { agent },
    })
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
  }
  for (let k = 0; k < 63; k++) await turn(k, "coder")
  // below 64 turns, every commit records
  expect(await lengthOf("long")).toEqual({ agent: "coder", turns: 63 })
  for (let k = 63; k < 67; k++) await turn(k, "coder")
  // 64–71 is one bucket: recorded when the session entered it, at 64
  expect(await lengthOf("long")).toEqual({ agent: "coder", turns: 64 })
  // another agent is recorded at once, with the turns then
  await turn(67, "reviewer")
  expect(await lengthOf("long")).toEqual({ agent: "reviewer", turns: 68 })
})
