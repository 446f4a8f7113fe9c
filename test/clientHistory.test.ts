// Turns sent with the client's whole history (`history: "client"`, what the
// gateway sends) against a real worker on Postgres and NATS: what is new is
// stored once; a history that forks starts a branch session on the same
// shard, stored apart from the session; a restarted worker finds the branch
// again from the store; the usage report of a branch's turn goes to it; a
// worker of an earlier release refuses a history sent in clientHistory.
import { WorkerProcess } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"
import * as PreviousRelease from "./PreviousRelease.ts"

let h: Harness.Harness
/** The worker of this checkout running now (tests restart it). */
let worker: WorkerProcess.WorkerProcess
beforeAll(async () => {
  h = await Harness.start()
  worker = h.worker
})
afterAll(async () => {
  await h?.close()
})

const u = (content: string) => ({ role: "user", content })
const a = (content: string) => ({ role: "assistant", content })
const turn = (session: string, turnId: string, messages: ReadonlyArray<Record<string, unknown>>) =>
  h.request(h.turnSubject("acme", session), {
    turnId,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o-mini" },
    system: "Be brief.",
    history: "client",
    messages,
  })

/** The stored messages' user/assistant texts of a session, in order. */
const stored = async (session: string) =>
  (
    await h.sql<{ content: { parts: Array<{ text: string }> } }>(
      "select m.content from ctxd_messages m join ctxd_sessions s on s.id = m.session_id where s.tenant = 'acme' and s.session = $1 order by m.seq",
      [session],
    )
  ).map((r) => r.content.parts.map((p) => p.text).join(""))

describe("client history against a worker", () => {
  it("stores each message once, forks into a branch, and finds it again after a restart", async () => {
    expect(await turn("ch-1", "t1", [u("hello")])).toMatchObject({ ok: true, report: { history: { session: "ch-1", appended: 1 } } })
    const two = await turn("ch-1", "t2", [u("hello"), a("hi"), u("list files")])
    expect(two.report.history).toEqual({ mode: "client", session: "ch-1", branch: 0, matched: 1, appended: 2 })
    expect(await stored("ch-1")).toEqual(["hello", "hi", "list files"])

    // the client compacted its history: a branch, the session untouched
    const forked = await turn("ch-1", "t3", [u("summary: hello, files"), a("ok"), u("go on")])
    const branch = forked.report.history.session as string
    expect(forked.report.history).toMatchObject({ branch: 1, forked: { from: "ch-1", at: 0, reason: "diverged" } })
    expect(await stored(branch)).toEqual(["summary: hello, files", "ok", "go on"])
    expect(await stored("ch-1")).toEqual(["hello", "hi", "list files"])

    // the usage of the branch's turn is reported to the branch
    const usage = await h.request(`${h.root}.v1.usage.acme.${branch}`, {
      turnId: "t3",
      usage: { prompt_tokens: 30, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 0 } },
    })
    expect(usage).toMatchObject({ ok: true, counted: true })
    // and found there when reported to the session the client asked (counted once)
    const t2Usage = { prompt_tokens: 20, completion_tokens: 5 }
    const again = await h.request(`${h.root}.v1.usage.acme.ch-1`, { turnId: "t3", usage: t2Usage })
    expect(again).toMatchObject({ ok: true })
    expect(await h.request(`${h.root}.v1.usage.acme.ch-1`, { turnId: "t2", usage: t2Usage })).toMatchObject({ ok: true, counted: true })
    expect(await h.request(`${h.root}.v1.usage.acme.ch-1`, { turnId: "nope", usage: t2Usage })).toMatchObject({ ok: false })

    // a new worker (no state in memory) finds the branch in the store and goes on in it
    await worker.stop()
    worker = await h.startWorker()
    const next = await turn("ch-1", "t4", [u("summary: hello, files"), a("ok"), u("go on"), a("done"), u("thanks")])
    expect(next.report.history).toMatchObject({ session: branch, branch: 1, matched: 3, appended: 2 })
    expect(await stored(branch)).toHaveLength(5)
    // and the main line too
    const main = await turn("ch-1", "t5", [u("hello"), a("hi"), u("list files"), a("a.ts"), u("more")])
    expect(main.report.history).toMatchObject({ session: "ch-1", branch: 0, matched: 3, appended: 2 })
    expect(await stored("ch-1")).toEqual(["hello", "hi", "list files", "a.ts", "more"])
    // a retry of a branch's turn is its stored reply
    expect(await turn("ch-1", "t4", [u("summary: hello, files"), a("ok"), u("go on"), a("done"), u("thanks")])).toEqual(next)
  })

  it("deletes a session's branches with it, and starts it anew from the session itself", async () => {
    await turn("ch-2", "t1", [u("hello")])
    const forked = await turn("ch-2", "t2", [u("other")])
    const branch = forked.report.history.session as string
    expect(await stored(branch)).toEqual(["other"])
    const deleted = await h.request(`${h.root}.v1.session.acme.ch-2`, { op: "delete" })
    expect(deleted).toMatchObject({ ok: true, deleted: true, removed: { sessions: 2, messages: 2 } })
    expect(await stored("ch-2")).toEqual([])
    expect(await stored(branch)).toEqual([])
    const again = await turn("ch-2", "t3", [u("fresh")])
    expect(again.report.history).toMatchObject({ session: "ch-2", branch: 0, appended: 1 })
  })

  it("takes the history in clientHistory, which a worker of an earlier release refuses, storing nothing", async () => {
    const body = (turnId: string, history: ReadonlyArray<Record<string, unknown>>) => ({
      turnId,
      format: "openai",
      model: { provider: "openai", name: "gpt-4o-mini" },
      history: "client",
      clientHistory: history,
    })
    const one = await h.request(h.turnSubject("acme", "ch-3"), body("t1", [u("hello")]))
    expect(one.report.history).toMatchObject({ session: "ch-3", appended: 1 })
    const release = PreviousRelease.extract()
    if ("skip" in release) return console.log(`the earlier release's refusal not tried: ${release.skip}`)
    try {
      await worker.stop()
      const old = await WorkerProcess.start(
        { DATABASE_URL: h.url, CTXD_DB_SCHEMA: h.schema, CTXD_SUBJECT_ROOT: h.root },
        { root: release.root },
      )
      try {
        const refused = await h.request(h.turnSubject("acme", "ch-3"), body("t2", [u("hello"), a("hi"), u("more")]), 20_000)
        expect(refused).toMatchObject({ ok: false, error: { code: "BadRequest", path: "messages" } })
        expect(await stored("ch-3")).toEqual(["hello"])
      } finally {
        await old.stop()
      }
    } finally {
      release.remove()
      worker = await h.startWorker()
    }
  }, 120_000)

  it("refuses a bad history mode with a BadRequest naming the field, storing nothing", async () => {
    const reply = await h.request(h.turnSubject("acme", "ch-bad"), {
      turnId: "t1",
      format: "openai",
      model: { provider: "openai", name: "gpt-4o-mini" },
      history: "all",
      messages: [u("x")],
    })
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest", path: "history" } })
    expect(await stored("ch-bad")).toEqual([])
  })
})
