import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { Database } from "../src/index.ts"

describe("Database", () => {
  layer(TestDatabase.layer)("on a throwaway schema", (it) => {
    it.effect("runs every connection in the configured schema", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        expect(db.schema).toMatch(/^t_[0-9a-f]{12}$/)
        const { rows } = yield* db.query<{ schema: string }>("SELECT current_schema() AS schema")
        expect(rows[0]?.schema).toBe(db.schema)
        yield* db.query("CREATE TABLE probe (n integer)")
        const found = yield* db.query("SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'probe'", [db.schema])
        expect(found.rowCount).toBe(1)
      }),
    )

    it.effect("commits a transaction that succeeds", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        yield* db.query("CREATE TABLE tx_ok (n integer)")
        const n = yield* db.transaction((tx) => tx.query("INSERT INTO tx_ok VALUES (1), (2)").pipe(Effect.map((r) => r.rowCount)))
        expect(n).toBe(2)
        expect((yield* db.query("SELECT * FROM tx_ok")).rowCount).toBe(2)
      }),
    )

    it.effect("rolls back a transaction that fails, in SQL or in code", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        yield* db.query("CREATE TABLE tx_fail (n integer PRIMARY KEY)")
        const sql = yield* db
          .transaction((tx) => tx.query("INSERT INTO tx_fail VALUES (1)").pipe(Effect.zipRight(tx.query("INSERT INTO tx_fail VALUES (1)"))))
          .pipe(Effect.flip)
        expect(sql._tag).toBe("DatabaseError")
        expect(sql._tag === "DatabaseError" && sql.code).toBe("23505")
        const code = yield* db
          .transaction((tx) => tx.query("INSERT INTO tx_fail VALUES (2)").pipe(Effect.zipRight(Effect.fail("nope" as const))))
          .pipe(Effect.flip)
        expect(code).toBe("nope")
        expect((yield* db.query("SELECT * FROM tx_fail")).rowCount).toBe(0)
        expect(db.poolStats().total - db.poolStats().idle).toBe(0)
      }),
    )

    it.effect("never leaks a connection when a transaction is interrupted", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        yield* db.query("CREATE TABLE tx_interrupt (n integer)")
        const fiber = yield* db
          .transaction((tx) => tx.query("INSERT INTO tx_interrupt VALUES (1)").pipe(Effect.zipRight(tx.query("SELECT pg_sleep(2)"))))
          .pipe(Effect.fork)
        // real time (it.effect runs on the TestClock): let the sleep reach the server
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
        const exit = yield* Fiber.interrupt(fiber)
        expect(Exit.isInterrupted(exit)).toBe(true)
        const stats = db.poolStats()
        expect(stats.total - stats.idle).toBe(0)
        expect((yield* db.query("SELECT * FROM tx_interrupt")).rowCount).toBe(0)
      }),
    )
  })

  it.live("fails fast with DatabaseUnavailable when Postgres is unreachable", () =>
    Effect.gen(function* () {
      const started = Date.now()
      const error = yield* Database.make({ url: "postgresql://postgres@127.0.0.1:1/postgres", connectTimeoutMs: 2_000 }).pipe(
        Effect.scoped,
        Effect.flip,
      )
      expect(error._tag).toBe("DatabaseUnavailable")
      expect(Date.now() - started).toBeLessThan(2_500)
    }),
  )

  it.live("rejects a schema name that would need quoting", () =>
    Effect.gen(function* () {
      const error = yield* Database.make({ url: "postgresql://postgres@127.0.0.1:5432/postgres", schema: "Bad-Name" }).pipe(
        Effect.scoped,
        Effect.flip,
      )
      expect(error._tag).toBe("DatabaseError")
    }),
  )

  it("classifies connection failures as unavailable and the rest as errors", () => {
    const err = (message: string, code?: string) => Object.assign(new Error(message), code === undefined ? {} : { code })
    expect(Database.classify(err("connect ECONNREFUSED 127.0.0.1:1", "ECONNREFUSED"))._tag).toBe("DatabaseUnavailable")
    const shutdown = err("terminating connection due to administrator command", "57P01")
    expect(Database.classify(shutdown)._tag).toBe("DatabaseUnavailable")
    expect(Database.classify(err("Connection terminated unexpectedly"))._tag).toBe("DatabaseUnavailable")
    expect(Database.classify(err("timeout exceeded when trying to connect"))._tag).toBe("DatabaseUnavailable")
    expect(Database.classify(new AggregateError([err("x", "ECONNREFUSED")]))._tag).toBe("DatabaseUnavailable")
    const duplicate = Database.classify(err("duplicate key value violates unique constraint", "23505"))
    expect(duplicate._tag).toBe("DatabaseError")
    expect(duplicate._tag === "DatabaseError" && duplicate.code).toBe("23505")
    expect(Database.classify("weird")._tag).toBe("DatabaseError")
  })
})
