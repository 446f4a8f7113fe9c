// Online migrations (issue 19 item 5): a worker of the previous migration
// level (extracted from git history) serves turns side by side with a worker
// of this checkout on one schema and subject root, in both orders of a
// rolling upgrade:
// - a new install: this checkout migrates (partitioned tables), then the
//   previous release joins it;
// - an existing deployment: the previous release creates and fills its
//   tables, this checkout joins and migrates them, and both serve;
// - an existing deployment of the newest release before partitions
//   (migration 10) creates and fills plain tables, this checkout joins (its
//   migrations find them populated and keep them), and the online conversion
//   to partitions runs while both serve.
// Every turn is answered, by both workers, and stored exactly once. Half of
// the sessions are on the shards each worker owns once their leases settle
// (the assignment is a function of the worker ids; `Cluster.settled` checks
// the leases are exactly it), so both serve for certain.
import { Database, Migrations, Partitions } from "@ctxd/db"
import { Assignment } from "@ctxd/sharding"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Cluster from "./Cluster.ts"
import * as PreviousRelease from "./PreviousRelease.ts"

const TENANT = "rolling"
const SESSIONS = 16

/** The migration that partitions a new install's messages and turns (an existing deployment converts online). */
const PARTITIONED = 10

const extract = (what: string, below?: number) => {
  const found = PreviousRelease.extract(below)
  if ("skip" in found) {
    console.log(`rolling upgrade from ${what} skipped: ${found.skip}`)
    return undefined
  }
  console.log(`${what}: ${found.commit.slice(0, 12)} (migrations up to ${found.level})`)
  return found
}
const release = extract("the previous release")
// the one an existing deployment with plain tables runs (the same while this checkout adds migration 10)
const plainRelease = release !== undefined && release.level < PARTITIONED ? release : extract("the release before partitions", PARTITIONED)

afterAll(() => {
  release?.remove()
  if (plainRelease !== release) plainRelease?.remove()
})

/** Sends `turns` turns on every session (in order per session, sessions in parallel), from `from` on. */
const drive = async (c: Cluster.Cluster, sessions: ReadonlyArray<string>, from: number, turns: number) => {
  const client = await c.client({ timeoutMs: 5_000, retryForMs: 20_000 })
  await Promise.all(
    sessions.map(async (session) => {
      for (let i = from; i < from + turns; i++) await client.turn(TENANT, session, Cluster.turn(session, i))
    }),
  )
}

const turnsServed = async (c: Cluster.Cluster) => new Map([...(await c.health())].map(([id, h]) => [id, h.turns ?? 0]))

/** Turns each worker served since `since` (a {@link turnsServed}). */
const servedSince = async (c: Cluster.Cluster, since: Map<string, number>) =>
  new Map([...(await turnsServed(c))].map(([id, n]) => [id, n - (since.get(id) ?? 0)]))

const WORKERS = ["new", "old"]

/** `SESSIONS` session names: half on the shards each of {@link WORKERS} owns once their leases settle. */
const onEach = (prefix: string) => {
  const owners = Assignment.assign(WORKERS, Cluster.SHARDS)
  const names: Array<string> = []
  for (const id of WORKERS) {
    for (let k = 0; k < SESSIONS / 2; k++) {
      names.push(Cluster.sessionIn(TENANT, Assignment.shardsOf(owners, id), `${prefix}${id}-`, new Set(names)))
    }
  }
  return names
}

const withDb = <A>(c: Cluster.Cluster, effect: Effect.Effect<A, unknown, Database.Database>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(Database.make({ url: c.url, schema: c.schema, statementTimeoutMs: 0 }), (db) =>
        Effect.provideService(effect, Database.Database, db),
      ),
    ),
  )

/** A cluster for the tests of the enclosing describe: started before them, closed after them. */
const started = (): (() => Cluster.Cluster) => {
  let c: Cluster.Cluster | undefined
  beforeAll(async () => {
    c = await Cluster.start()
  })
  afterAll(async () => {
    await c?.close()
  })
  return () => c!
}

/** A deployment of the release at `root` serves `sessions` two turns each; this checkout joins and migrates the schema. */
const joined = async (c: Cluster.Cluster, root: string, sessions: ReadonlyArray<string>) => {
  await c.start("old", {}, root)
  await drive(c, sessions, 0, 2)
  await c.start("new")
  await c.settled(WORKERS, 4 * Cluster.TTL_MS)
  const levels = await c.sql<{ version: number }>("SELECT version FROM ctxd_schema_migrations ORDER BY version")
  expect(levels.map((r) => r.version)).toEqual(Migrations.migrations.map((m) => m.version))
}

describe.skipIf(release === undefined)("rolling upgrade between migration levels", () => {
  describe("a new install, then a worker of the previous release joins", () => {
    const cluster = started()

    it("both serve turns on the partitioned schema; every turn stored once", { timeout: 90_000 }, async () => {
      const c = cluster()
      await c.start("new")
      expect((await withDb(c, Partitions.status)).partitioned).toBe(true)
      await c.start("old", {}, release!.root)
      await c.settled(WORKERS, 4 * Cluster.TTL_MS)
      const old = c.workers.get("old")!.output()
      expect(old).toMatch(new RegExp(`newer than this release: ${Math.max(...Migrations.migrations.map((m) => m.version))}`))

      const sessions = onEach("n")
      const before = await turnsServed(c)
      await drive(c, sessions, 0, 4)
      const served = await servedSince(c, before)
      expect(served.get("new")).toBeGreaterThan(0)
      expect(served.get("old")).toBeGreaterThan(0)
      expect(await Cluster.expectExactlyOnce(c, TENANT, sessions, () => 4)).toEqual([])
      const hashed = await c.sql<{ n: string }>("SELECT count(*) AS n FROM ctxd_messages_h")
      expect(Number(hashed[0]!.n)).toBe(SESSIONS * 4)
    })
  })

  describe.skipIf(release === undefined || release.level < PARTITIONED)(
    "an existing deployment of the previous release (partitioned), upgraded while both serve",
    () => {
      const cluster = started()

      it("no turn fails or is stored twice across the join", { timeout: 90_000 }, async () => {
        const c = cluster()
        const sessions = onEach("p")
        await joined(c, release!.root, sessions)
        expect((await withDb(c, Partitions.status)).partitioned).toBe(true)
        const before = await turnsServed(c)
        await drive(c, sessions, 2, 4)

        const served = await servedSince(c, before)
        expect(served.get("new")).toBeGreaterThan(0)
        expect(served.get("old")).toBeGreaterThan(0)
        expect(await Cluster.expectExactlyOnce(c, TENANT, sessions, () => 6)).toEqual([])
      })
    },
  )
})

describe.skipIf(plainRelease === undefined)("rolling upgrade from a release before partitions", () => {
  describe("an existing deployment: that release's schema, upgraded and converted online while both serve", () => {
    const cluster = started()

    it("no turn fails or is stored twice across the join and the conversion", { timeout: 120_000 }, async () => {
      const c = cluster()
      const sessions = onEach("e")
      await joined(c, plainRelease!.root, sessions)
      const before = await turnsServed(c)
      // populated: migration 10 kept the plain tables
      expect((await withDb(c, Partitions.status)).partitioned).toBe(false)
      await drive(c, sessions, 2, 2)

      // the conversion runs while both workers take turns
      const load = drive(c, sessions, 4, 4)
      const converted = await withDb(c, Partitions.convert())
      await load
      expect(converted.converted).toBe(true)
      console.log(`online conversion: the swap took (lock waits included) ${converted.swapMs.toFixed(1)} ms`)
      // after it: old sessions (their messages stay in the first partition) and new ones (hash partitions)
      await Promise.all([drive(c, sessions, 8, 2), drive(c, ["late0", "late1"], 0, 8)])
      const hashed = await c.sql<{ n: string }>("SELECT count(*) AS n FROM ctxd_messages_h")
      expect(Number(hashed[0]!.n)).toBeGreaterThanOrEqual(16)

      const served = await servedSince(c, before)
      expect(served.get("new")).toBeGreaterThan(0)
      expect(served.get("old")).toBeGreaterThan(0)
      expect(await Cluster.expectExactlyOnce(c, TENANT, sessions, () => 10)).toEqual([])
      expect(await Cluster.expectExactlyOnce(c, TENANT, ["late0", "late1"], () => 8)).toEqual([])
    })
  })
})
