// Cache breaks ctxd did not cause, through a real worker: a usage report whose
// billed cache reads fall well below the turn's `report.cache.expectedReadTokens`
// is answered with `cache.break: "unexpected"` and counted in
// `ctxd_cache_break_total{reason="unexpected"}`; a matching one with `none`;
// ctxd's own prefix changes count under their reason; a turn whose report has
// no expectation is answered as before.
import { Database, SessionStore } from "@ctxd/db"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
})
afterAll(async () => {
  await h?.close()
})

const turnOf = Harness.tauTurns

const usage = (session: string, turnId: string, body: unknown) => h.request(`${h.root}.v1.usage.acme.${session}`, { turnId, usage: body })

/** `ctxd_cache_break_total{reason}` of the worker (0 before the first count). */
const breaks = async (reason: string): Promise<number> => {
  const reply = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
  const metric = (reply.metrics as ReadonlyArray<{ name: string; tags: Record<string, string>; value?: number }>).find(
    (m) => m.name === "ctxd_cache_break_total" && m.tags.reason === reason,
  )
  return metric?.value ?? 0
}

/** Anthropic usage billing `read` from the cache, `write` to it, and the rest of `total` uncached. */
const anthropicUsage = (total: number, read: number, write: number) => ({
  input_tokens: Math.max(0, total - read - write),
  cache_read_input_tokens: read,
  cache_creation_input_tokens: write,
  output_tokens: 20,
})

/** Commits `turnId` straight into the worker's schema (no messages), with `reply` as its stored reply. */
const commitTurn = (session: string, turnId: string, reply: unknown) =>
  Effect.runPromise(
    Effect.flatMap(SessionStore.SessionStore, (store) =>
      store.commitTurn({ tenant: "acme", session, turnId, requestHash: `hash-${turnId}`, expectedLastSeq: 0, messages: [], reply }),
    ).pipe(
      Effect.provide(
        SessionStore.layer.pipe(
          Layer.provide(
            Layer.scoped(
              Database.Database,
              Database.make({
                url: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
                schema: h.schema,
                poolMax: 1,
              }),
            ),
          ),
        ),
      ),
    ),
  )

describe("cache breaks from usage reports", () => {
  it("flags a billed read well below the turn's own expectation (turns answered by the worker)", async () => {
    const turn = turnOf(5)
    let reply: any // eslint-disable-line @typescript-eslint/no-explicit-any
    for (let k = 0; k < 4; k++) {
      reply = await h.request(h.turnSubject("acme", "live"), turn(k))
      expect(reply.ok).toBe(true)
    }
    const cache = reply.report.cache
    // the pipeline's cache report: what the provider should read from its cache on this warm turn
    expect(typeof cache.expectedReadTokens).toBe("number")
    const total: number = reply.report.tokens.total
    const expected: number = cache.expectedReadTokens
    expect(expected).toBeGreaterThan(100) // a warm fourth turn of a tau-bench session: at least system and tools are cached
    const before = await breaks("unexpected")
    const low = await usage("live", "t3", anthropicUsage(total, 0, total))
    expect(low).toMatchObject({
      ok: true,
      counted: true,
      cache: { expectedReadTokens: expected, billedReadTokens: 0, break: "unexpected" },
    })
    expect(await breaks("unexpected")).toBe(before + 1)

    const next = await h.request(h.turnSubject("acme", "live"), turn(4))
    expect(next.ok).toBe(true)
    const read: number = next.report.cache.expectedReadTokens
    const matching = await usage("live", "t4", anthropicUsage(next.report.tokens.total, read, next.report.tokens.total - read))
    expect(matching).toMatchObject({ ok: true, counted: true, cache: { billedReadTokens: read, break: "none" } })
    expect(await breaks("unexpected")).toBe(before + 1)
  })

  it("compares with the stored reply's expectation: unexpected once per turn, none, ctxd's own reason, either provider", async () => {
    // a real reply of this worker, stored again with the cache expectation the pipeline reports
    const real = await h.request(h.turnSubject("acme", "source"), turnOf(6)(0))
    expect(real.ok).toBe(true)
    const total: number = real.report.tokens.total
    const read = Math.floor(total * 0.8)
    // only the fields every worker writes, then the expectation (none for c4)
    const plain = { breakpoints: real.report.cache.breakpoints, promptCacheKey: real.report.cache.promptCacheKey }
    const withCache = (turnId: string, cache: Record<string, unknown>) => ({
      ...real,
      turnId,
      report: { ...real.report, cache: { ...plain, ...cache } },
    })
    await commitTurn(
      "stored",
      "c1",
      withCache("c1", {
        prefixTokens: total,
        ttlSeconds: 300,
        changedAtTokens: read,
        reason: "append",
        expectedReadTokens: read,
        expectedWriteTokens: total - read,
      }),
    )
    await commitTurn(
      "stored",
      "c2",
      withCache("c2", {
        prefixTokens: total,
        ttlSeconds: 300,
        changedAtTokens: read,
        reason: "append",
        expectedReadTokens: read,
        expectedWriteTokens: total - read,
      }),
    )
    await commitTurn(
      "stored",
      "c3",
      withCache("c3", {
        prefixTokens: total,
        ttlSeconds: 300,
        changedAtTokens: 100,
        reason: "window",
        expectedReadTokens: 0,
        expectedWriteTokens: total,
      }),
    )
    await commitTurn("stored", "c4", withCache("c4", {}))

    const before = { unexpected: await breaks("unexpected"), window: await breaks("window") }
    // Anthropic field names, a tenth of the expected read billed
    const low = await usage("stored", "c1", anthropicUsage(total, Math.floor(read / 10), total - Math.floor(read / 10)))
    expect(low).toMatchObject({
      ok: true,
      counted: true,
      cache: {
        expectedReadTokens: read,
        expectedWriteTokens: total - read,
        billedReadTokens: Math.floor(read / 10),
        break: "unexpected",
        reason: "append",
      },
    })
    expect(low.cache.minReadTokens).toBe(Math.ceil(0.9 * read - 64))
    expect(await breaks("unexpected")).toBe(before.unexpected + 1)
    // the same report again: same verdict, counted once
    const again = await usage("stored", "c1", anthropicUsage(total, Math.floor(read / 10), total - Math.floor(read / 10)))
    expect(again).toMatchObject({ ok: true, counted: false, cache: { break: "unexpected" } })
    expect(await breaks("unexpected")).toBe(before.unexpected + 1)

    // OpenAI field names, the expected read billed (rounded down to OpenAI's 128-token steps)
    const cached = Math.floor(read / 128) * 128
    const matching = await usage("stored", "c2", {
      prompt_tokens: total,
      prompt_tokens_details: { cached_tokens: cached },
      completion_tokens: 20,
    })
    expect(matching).toMatchObject({
      ok: true,
      counted: true,
      cache: { billedReadTokens: cached, billedWriteTokens: total - cached, break: "none" },
    })

    // ctxd's own break (a window cut): no read expected, counted under its reason
    const cut = await usage("stored", "c3", anthropicUsage(total, 0, total))
    expect(cut).toMatchObject({ ok: true, cache: { expectedReadTokens: 0, break: "none", reason: "window" } })
    expect(await breaks("window")).toBe(before.window + 1)
    expect(await breaks("unexpected")).toBe(before.unexpected + 1)

    // a stored report without the expectation (an older worker's reply): answered as before
    const old = await usage("stored", "c4", anthropicUsage(total, 0, total))
    expect(old).toMatchObject({ ok: true, counted: true })
    expect(old).not.toHaveProperty("cache")
    expect(await breaks("unexpected")).toBe(before.unexpected + 1)
  })
})
