// Data lifecycle end to end, with a real worker and a raw nats.js client:
// expired replies pruned while turns are served (no turn lost; a retry within
// the window gets the stored reply, after it Conflict), a tenant's retention,
// delete (no row of the session left in any table; idempotent; fenced against
// a burst of turns; the next turn starts fresh), export pages, deleteUser.
import { ContextClient } from "@ctxd/client"
import { ShardId } from "@ctxd/sharding"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const dir = mkdtempSync(join(tmpdir(), "ctxd-lifecycle-"))
const tenantsFile = join(dir, "tenants.json")
writeFileSync(tenantsFile, JSON.stringify({ ret: { retentionDays: 1 } }))

let h: Harness.Harness
beforeAll(async () => {
  // the pruner every 100 ms, 3 replies per batch (the default window, 24 h: the tests move rows back in time)
  h = await Harness.start({ CTXD_TENANTS_FILE: tenantsFile, CTXD_PRUNE_INTERVAL_MS: "100", CTXD_PRUNE_BATCH: "3" })
}, 90_000)
afterAll(async () => {
  await h?.close()
})

/** Turn `k` of a session: the previous answer and a new question (the first: the question alone). */
const turn = (k: number, options?: Record<string, unknown>) => ({
  turnId: `t${k}`,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  messages: [...(k === 0 ? [] : [{ role: "assistant", content: `answer ${k - 1}` }]), { role: "user", content: `question ${k}` }],
  ...(options === undefined ? {} : { options }),
})

const sessionSubject = (tenant: string, session: string) => `${h.root}.v1.session.${tenant}.${session}`

/** Runs turns 0..n-1 of the session one after the other; their replies. */
const conversation = async (tenant: string, session: string, n: number, options?: Record<string, unknown>) => {
  const replies = []
  for (let k = 0; k < n; k++) replies.push(await h.request(h.turnSubject(tenant, session), turn(k, options), 15_000))
  return replies
}

const sessionId = async (tenant: string, session: string): Promise<string | undefined> =>
  (await h.sql<{ id: string }>(`SELECT id::text AS id FROM ctxd_sessions WHERE tenant = $1 AND session = $2`, [tenant, session]))[0]?.id

/** Rows naming the session (by id, or by tenant and name) in every ctxd table that has such a column. */
const leftovers = async (tenant: string, session: string, id: string) => {
  const columns = await h.sql<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND table_name LIKE 'ctxd\\_%' AND column_name IN ('session_id', 'session')`,
  )
  const found: Record<string, number> = {}
  const tables = new Set(columns.map((c) => c.table_name))
  for (const table of tables) {
    const bySessionId = columns.some((c) => c.table_name === table && c.column_name === "session_id")
    const [row] = bySessionId
      ? await h.sql<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE session_id = $1::bigint`, [id])
      : await h.sql<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE tenant = $1 AND session = $2`, [tenant, session])
    if (Number(row!.n) > 0) found[table] = Number(row!.n)
  }
  const [session_] = await h.sql<{ n: string }>(`SELECT count(*) AS n FROM ctxd_sessions WHERE id = $1::bigint`, [id])
  if (Number(session_!.n) > 0) found.ctxd_sessions = Number(session_!.n)
  return { found, tables: tables.size }
}

/**
 * The session's stored state is whole: messages numbered 1..last_seq without
 * a gap, every turn's messages present, every message's turn recorded.
 */
const consistent = async (tenant: string, session: string) => {
  const id = await sessionId(tenant, session)
  if (id === undefined) return { messages: 0, turns: 0 }
  const [s] = await h.sql<{ last_seq: number }>(`SELECT last_seq FROM ctxd_sessions WHERE id = $1::bigint`, [id])
  const seqs = (await h.sql<{ seq: number }>(`SELECT seq FROM ctxd_messages WHERE session_id = $1::bigint ORDER BY seq`, [id])).map(
    (r) => r.seq,
  )
  expect(seqs).toEqual(Array.from({ length: s!.last_seq }, (_, i) => i + 1))
  const turns = await h.sql<{ turn_id: string; first_seq: number; last_seq: number; n: string }>(
    `SELECT t.turn_id, t.first_seq, t.last_seq,
            (SELECT count(*) FROM ctxd_messages m WHERE m.session_id = t.session_id AND m.turn_id = t.turn_id) AS n
     FROM ctxd_turns t WHERE t.session_id = $1::bigint`,
    [id],
  )
  for (const t of turns) expect(Number(t.n), t.turn_id).toBe(Math.max(0, t.last_seq - t.first_seq + 1))
  const [orphans] = await h.sql<{ n: string }>(
    `SELECT count(*) AS n FROM ctxd_messages m WHERE m.session_id = $1::bigint
     AND NOT EXISTS (SELECT 1 FROM ctxd_turns t WHERE t.session_id = m.session_id AND t.turn_id = m.turn_id)`,
    [id],
  )
  expect(Number(orphans!.n)).toBe(0)
  return { messages: seqs.length, turns: turns.length }
}

/** Polls `check` every 100 ms until it holds, at most `tries` times. */
const eventually = async (check: () => Promise<boolean>, tries = 300) => {
  for (let i = 0; i < tries; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`condition not reached; the worker's log ends with: ${h.worker.output().slice(-3000)}`)
}

describe("reply retention", () => {
  it("prunes expired replies in batches while turns are served; no turn lost; a late retry gets Conflict, an early one the stored reply", async () => {
    const sessions = ["p0", "p1", "p2", "p3"]
    let running = true
    // while the turns run, every committed turn is moved 25 h back: the pruner (batches of 3, every 100 ms) takes them as they come
    const age = () =>
      h.sql(
        `UPDATE ctxd_turns t SET created_at = now() - interval '25 hours' FROM ctxd_sessions s
         WHERE s.id = t.session_id AND s.tenant = 'prune' AND t.created_at > now() - interval '1 hour'`,
      )
    const ager = (async () => {
      while (running) {
        await age()
        await new Promise((resolve) => setTimeout(resolve, 30))
      }
    })()
    const replies = await Promise.all(sessions.map((s) => conversation("prune", s, 8)))
    running = false
    await ager
    await age()
    for (const r of replies.flat()) expect(r, JSON.stringify(r).slice(0, 300)).toMatchObject({ ok: true })
    await eventually(async () => {
      const [row] = await h.sql<{ n: string }>(
        `SELECT count(*) AS n FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id WHERE s.tenant = 'prune' AND t.reply_z IS NOT NULL`,
      )
      return Number(row!.n) === 0
    })
    // no turn lost: every turn row kept, every message stored, in order
    for (const s of sessions) expect(await consistent("prune", s)).toEqual({ messages: 15, turns: 8 })
    // a retry after the window: Conflict, saying so
    const late = await h.request(h.turnSubject("prune", "p1"), turn(3), 15_000)
    expect(late).toMatchObject({ ok: false, error: { code: "Conflict", path: "turnId" } })
    expect(late.error.message).toMatch(/idempotency window/)
    expect(late.error.hint).toMatch(/CTXD_REPLY_RETENTION/)
    // a usage report past the window: the turn's estimate is gone with its reply
    expect(await h.request(`${h.root}.v1.usage.prune.p1`, { turnId: "t3", usage: { prompt_tokens: 20 } })).toMatchObject({
      ok: false,
      error: { code: "BadRequest" },
    })
    // the retry appended nothing
    expect(await consistent("prune", "p1")).toEqual({ messages: 15, turns: 8 })
    // within the window: the same reply
    const [first] = await conversation("prune", "fresh", 1)
    expect(await h.request(h.turnSubject("prune", "fresh"), turn(0), 15_000)).toEqual(first)
  }, 120_000)
})

describe("retention per tenant", () => {
  it("deletes the sessions of a tenant with retentionDays once idle longer; the others stay; a next turn starts fresh", async () => {
    await conversation("ret", "old", 3)
    await conversation("ret", "new", 2)
    await conversation("noret", "old", 2)
    await h.sql(`UPDATE ctxd_sessions SET updated_at = now() - interval '2 days' WHERE session = 'old'`)
    const id = (await sessionId("ret", "old"))!
    await eventually(async () => (await sessionId("ret", "old")) === undefined)
    expect((await leftovers("ret", "old", id)).found).toEqual({})
    expect(await sessionId("ret", "new")).toBeDefined()
    expect(await sessionId("noret", "old")).toBeDefined()
    // the worker still had the session in memory: its next turn finds it gone and starts anew
    const next = await h.request(
      h.turnSubject("ret", "old"),
      { ...turn(3), messages: [{ role: "user", content: "back again" }], turnId: "again" },
      15_000,
    )
    expect(next).toMatchObject({ ok: true })
    expect(await consistent("ret", "old")).toEqual({ messages: 1, turns: 1 })
  }, 60_000)
})

describe("ctx.v1.session.<tenant>.<session>", () => {
  it("delete removes every row of the session in every table, is idempotent, and the next turn starts a fresh session", async () => {
    await conversation("acme", "d1", 4, { user: "dora" })
    await h.request(`${h.root}.v1.usage.acme.d1`, { turnId: "t1", usage: { prompt_tokens: 20 } })
    await conversation("acme", "d2", 2)
    const id = (await sessionId("acme", "d1"))!
    const before = await leftovers("acme", "d1", id)
    expect(Object.keys(before.found)).toEqual(
      expect.arrayContaining(["ctxd_messages", "ctxd_turns", "ctxd_sessions", "ctxd_session_users", "ctxd_usage_reports"]),
    )
    const deleted = await h.request(sessionSubject("acme", "d1"), { op: "delete" })
    expect(deleted).toEqual({
      ok: true,
      deleted: true,
      removed: { sessions: 1, messages: 7, turns: 4, summaries: 0, compactions: 0, usageReports: 1 },
    })
    const after = await leftovers("acme", "d1", id)
    expect(after.found).toEqual({})
    expect(after.tables).toBeGreaterThanOrEqual(8)
    expect(await h.request(sessionSubject("acme", "d1"), { op: "delete" })).toEqual({
      ok: true,
      deleted: false,
      removed: { sessions: 0, messages: 0, turns: 0, summaries: 0, compactions: 0, usageReports: 0 },
    })
    expect(await consistent("acme", "d2")).toEqual({ messages: 3, turns: 2 })
    // a turn that continues the deleted conversation: a new session holding only its own messages
    const next = await h.request(h.turnSubject("acme", "d1"), { ...turn(4), turnId: "after-delete" }, 15_000)
    expect(next).toMatchObject({ ok: true })
    expect(await consistent("acme", "d1")).toEqual({ messages: 2, turns: 1 })
    expect(next.report.messages.sent).toBeLessThanOrEqual(2)
  }, 60_000)

  it("a delete in a burst of turns on the session leaves no half state, whichever wins, and the next turn starts fresh", async () => {
    await conversation("acme", "burst", 2)
    // The delete and the turns race: the product promises no order between
    // them (any of the turns may land before or after the delete), only that
    // each is whole. A turn answered in the old session sees its first
    // question; one answered after the delete starts a new session and does not.
    const ids = [...Array.from({ length: 16 }, (_, i) => `b${i}`), ...Array.from({ length: 8 }, (_, i) => `c${i}`)]
    const text = (id: string) => `burst ${id}`
    const send = (id: string) =>
      h.request(h.turnSubject("acme", "burst"), { ...turn(2), turnId: id, messages: [{ role: "user", content: text(id) }] }, 30_000)
    const sends = ids.slice(0, 16).map(send)
    const deletion = h.request(sessionSubject("acme", "burst"), { op: "delete" }, 30_000)
    const more = ids.slice(16).map(send)
    const [deleted, ...replies] = await Promise.all([deletion, ...sends, ...more])
    // the session held t0 and t1 when the delete was sent
    expect(deleted).toMatchObject({ ok: true, deleted: true })
    for (const r of replies) {
      if (r.ok !== true) expect(["Busy", "Unavailable"], JSON.stringify(r)).toContain(r.error.code)
    }
    const answered = ids.filter((_, i) => replies[i].ok === true)
    expect(answered.length, "every turn of the burst refused").toBeGreaterThan(0)
    const sees = (id: string, needle: string) => JSON.stringify(replies[ids.indexOf(id)].request).includes(JSON.stringify(needle))
    const after = answered.filter((id) => !sees(id, "question 0"))
    // whatever is stored now is a whole session (consistent) made only of turns answered after the delete
    const state = await consistent("acme", "burst")
    const sid = await sessionId("acme", "burst")
    const stored =
      sid === undefined
        ? []
        : (await h.sql<{ turn_id: string }>(`SELECT turn_id FROM ctxd_turns WHERE session_id = $1::bigint`, [sid])).map((r) => r.turn_id)
    expect(stored.sort(), "stored turns are exactly those answered after the delete").toEqual([...after].sort())
    expect(state).toEqual({ messages: after.length, turns: after.length })
    // a reply after the delete shows only turns that are stored: nothing from before it, nothing half-written
    for (const id of after) {
      for (const other of ids) if (sees(id, text(other))) expect(stored, `${id}'s reply shows ${other}`).toContain(other)
    }
    // and once deleted again, the next turn is alone in a new session
    expect(await h.request(sessionSubject("acme", "burst"), { op: "delete" })).toMatchObject({ ok: true })
    expect(await h.request(h.turnSubject("acme", "burst"), { ...turn(0), turnId: "alone" }, 15_000)).toMatchObject({ ok: true })
    expect(await consistent("acme", "burst")).toEqual({ messages: 1, turns: 1 })
  }, 90_000)

  it("export pages reassemble to the whole stored history", async () => {
    await conversation("acme", "e1", 12, { user: "erin" })
    const whole = await h.request(sessionSubject("acme", "e1"), { op: "export", limit: 5000 })
    expect(whole.ok).toBe(true)
    expect(whole.nextCursor).toBeUndefined()
    const lines = (whole.lines as string)
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(lines[0]).toMatchObject({ kind: "session", tenant: "acme", session: "e1", lastSeq: 23, users: ["erin"] })
    const messages = lines.filter((l) => l.kind === "message")
    expect(messages.map((m) => m.seq)).toEqual(Array.from({ length: 23 }, (_, i) => i + 1))
    expect(messages[0].message).toMatchObject({ role: "user" })
    expect(JSON.stringify(messages[0].message)).toContain("question 0")
    expect(
      lines
        .filter((l) => l.kind === "turn")
        .map((t) => t.turnId)
        .sort(),
    ).toEqual(Array.from({ length: 12 }, (_, k) => `t${k}`).sort())
    let text = ""
    let cursor: string | undefined
    let pages = 0
    do {
      const page = await h.request(sessionSubject("acme", "e1"), { op: "export", limit: 7, ...(cursor === undefined ? {} : { cursor }) })
      expect(page.ok).toBe(true)
      text += page.lines
      cursor = page.nextCursor
      pages++
    } while (cursor !== undefined && pages < 100)
    expect(text).toBe(whole.lines)
    expect(pages).toBe(Math.ceil(lines.length / 7))
    // a cursor that is not one: BadRequest on the cursor
    expect(await h.request(sessionSubject("acme", "e1"), { op: "export", cursor: "garbage" })).toMatchObject({
      ok: false,
      error: { code: "BadRequest", path: "cursor" },
    })
    // an unknown session: nothing
    expect(await h.request(sessionSubject("acme", "nobody"), { op: "export" })).toEqual({ ok: true, lines: "" })
  }, 60_000)

  it("inspect: the latest turns, and what one turn stored and sent; nothing for an unknown session", async () => {
    const replies = await conversation("acme", "insp", 3)
    const newest = await h.request(sessionSubject("acme", "insp"), { op: "inspect" })
    expect(newest.turns.map((t: { turnId: string }) => t.turnId)).toEqual(["t2", "t1", "t0"])
    expect(newest).toMatchObject({ ok: true, turnId: "t2", stored: 2 })
    expect(newest.report).toEqual(replies[2].report)
    expect(newest.request).toEqual(replies[2].request)
    const first = await h.request(sessionSubject("acme", "insp"), { op: "inspect", turnId: "t0", limit: 1 })
    expect(first).toMatchObject({ ok: true, turnId: "t0", stored: 1, turns: [{ turnId: "t2" }] })
    expect(first.request).toEqual(replies[0].request)
    expect(await h.request(sessionSubject("acme", "insp"), { op: "inspect", turnId: "nope" })).toEqual({ ok: true, turns: newest.turns })
    expect(await h.request(sessionSubject("acme", "never"), { op: "inspect" })).toEqual({ ok: true, turns: [] })
    expect(await h.request(sessionSubject("acme", "insp"), { op: "inspect", limit: 0 })).toMatchObject({
      ok: false,
      error: { code: "BadRequest" },
    })
  })

  it("answers a request it does not know with BadRequest", async () => {
    expect(await h.request(sessionSubject("acme", "x"), { op: "frobnicate" })).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(await h.request(sessionSubject("acme", "x"), "{")).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(await h.request(`${h.root}.v1.user.acme`, { op: "deleteUser", user: "bad user" })).toMatchObject({
      ok: false,
      error: { code: "BadRequest", path: "user" },
    })
  })
})

describe("ctx.v1.user.<tenant>", () => {
  it("deleteUser deletes the tenant's sessions whose turns carried the user, and no other", async () => {
    await conversation("acme", "ua", 2, { user: "alice" })
    await conversation("acme", "ub", 1, { user: "alice" })
    await conversation("acme", "uc", 2, { user: "bob" })
    await conversation("globex", "ua", 1, { user: "alice" })
    // memories: alice's (two agents), the agent's shared one, and globex's alice
    const remember = (tenant: string, body: Record<string, unknown>) =>
      h.request(`${h.root}.v1.memory.${tenant}`, { op: "remember", ...body })
    for (const body of [
      { user: "alice", text: "alice likes aisle seats" },
      { agent: "travel", user: "alice", text: "alice flies Fridays" },
      { text: "shared policy note" },
    ]) {
      expect(await remember("acme", body)).toMatchObject({ ok: true })
    }
    expect(await remember("globex", { user: "alice", text: "globex alice" })).toMatchObject({ ok: true })
    const reply = await h.request(`${h.root}.v1.user.acme`, { op: "deleteUser", user: "alice" })
    expect(reply).toEqual({
      ok: true,
      removed: { sessions: 2, messages: 4, turns: 3, summaries: 0, compactions: 0, usageReports: 0 },
      more: false,
      memories: 2,
    })
    const listed = await h.request(`${h.root}.v1.memory.acme`, { op: "list", user: "alice" })
    expect(listed.documents.map((d: { text: string }) => d.text)).toEqual(["shared policy note"])
    expect((await h.request(`${h.root}.v1.memory.globex`, { op: "list", user: "alice" })).documents).toHaveLength(1)
    expect(await sessionId("acme", "ua")).toBeUndefined()
    expect(await sessionId("acme", "ub")).toBeUndefined()
    expect(await sessionId("acme", "uc")).toBeDefined()
    expect(await sessionId("globex", "ua")).toBeDefined()
    expect((await h.request(`${h.root}.v1.user.acme`, { op: "deleteUser", user: "alice" })).removed.sessions).toBe(0)
  }, 60_000)
})

describe("ContextClient", () => {
  it("deleteSession, exportSession and deleteUser", async () => {
    const client = await ContextClient.connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", root: h.root })
    try {
      await conversation("acme", "cl", 3, { user: "cleo" })
      const page = await client.exportSession("acme", "cl", { limit: 2 })
      expect(page.lines.trimEnd().split("\n").length).toBe(2)
      expect(page.nextCursor).toBeDefined()
      const rest = await client.exportSession("acme", "cl", { cursor: page.nextCursor, limit: 100 })
      expect(rest.nextCursor).toBeUndefined()
      expect((page.lines + rest.lines).trimEnd().split("\n").length).toBe(1 + 5 + 3)
      expect(await client.deleteSession("acme", "cl")).toMatchObject({ ok: true, deleted: true, removed: { sessions: 1, messages: 5 } })
      expect(await client.deleteSession("acme", "cl")).toMatchObject({ deleted: false })
      await conversation("acme", "cl2", 1, { user: "cleo" })
      expect(await client.deleteUser("acme", "cleo")).toMatchObject({ ok: true, removed: { sessions: 1 }, more: false })
      await expect(client.deleteSession("acme", "bad session")).rejects.toMatchObject({ code: "BadRequest" })
    } finally {
      await client.close()
    }
  }, 60_000)
})

describe("two workers", () => {
  it("a delete is carried out by the owner of the session's shard, wherever it arrives", async () => {
    const second = await h.startWorker({ CTXD_WORKER_ID: "lifecycle-w2" })
    // both workers own shards (the assignment settles within a few lease rounds)
    await eventually(async () => {
      const owners = await h.sql<{ owner: string; n: string }>(
        `SELECT owner, count(*) AS n FROM ctxd_shard_leases WHERE expires_at > now() GROUP BY owner`,
      )
      return owners.length === 2 && owners.every((o) => Number(o.n) > 64) && owners.reduce((a, o) => a + Number(o.n), 0) === 256
    })
    const client = await ContextClient.connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", root: h.root, direct: false })
    try {
      const sessions = Array.from({ length: 12 }, (_, i) => `f${i}`)
      for (const s of sessions) {
        for (let k = 0; k < 2; k++) await client.turn("acme", s, turn(k) as ContextClient.TurnInput)
      }
      const ownerOf = async (s: string) =>
        (await h.sql<{ owner: string }>(`SELECT owner FROM ctxd_shard_leases WHERE shard = $1`, [ShardId.of("acme", s)]))[0]!.owner
      const owners = await Promise.all(sessions.map(ownerOf))
      expect(new Set(owners).size).toBe(2)
      // raw requests on the shared subject: the queue group hands each to either worker
      for (const s of sessions) {
        expect(await h.request(sessionSubject("acme", s), { op: "delete" }, 15_000)).toMatchObject({
          ok: true,
          deleted: true,
          removed: { sessions: 1, messages: 3 },
        })
      }
      const logged = (output: string, s: string) =>
        output
          .split("\n")
          .some((line) => line.includes("session deleted on request") && line.includes(`"session":"${s}"`) && line.includes('"owner":true'))
      for (const [i, s] of sessions.entries()) {
        const worker = owners[i] === "lifecycle-w2" ? second : h.worker
        expect(logged(worker.output(), s), `${s} deleted by its owner ${owners[i]}`).toBe(true)
        // the next turn starts a new session (the owner forgot the old one)
        await client.turn("acme", s, { ...turn(2), turnId: "after" } as ContextClient.TurnInput)
        expect(await consistent("acme", s)).toEqual({ messages: 2, turns: 1 })
      }
    } finally {
      await client.close()
    }
  }, 120_000)
})
