// Postgres TLS and passwords against the local server (no TLS): a password
// with sslmode=disable connects, `require` fails clearly, and the password in
// DATABASE_URL appears in no error.
import { Cause, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { Database } from "../src/index.ts"

const BASE = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres"
const PASSWORD = "pg-secret-7c1d9e2a"
/** The test database's URL with a password (the local server trusts, so any password works). */
const withPassword = (query = "") => {
  const url = new URL(BASE)
  url.password = PASSWORD
  return `${url.toString()}${query}`
}

describe("against the local Postgres", () => {
  const open = (url: string) =>
    Effect.runPromiseExit(
      Effect.scoped(Effect.flatMap(Database.make({ url, poolMax: 1, connectTimeoutMs: 3_000 }), (db) => db.query("SELECT 1 AS one"))),
    )

  it("connects with a password and sslmode=disable", async () => {
    const exit = await open(withPassword("?sslmode=disable"))
    expect(Exit.isSuccess(exit) && exit.value.rows).toEqual([{ one: 1 }])
  })

  it("sslmode=require against a server without TLS fails clearly, without the password", async () => {
    const exit = await open(withPassword("?sslmode=require"))
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) {
      const text = Cause.pretty(exit.cause, { renderErrorCause: true })
      expect(text).toContain("The server does not support SSL connections")
      expect(text).not.toContain(PASSWORD)
      // a configuration error: a worker stops at once instead of retrying
      expect(Cause.failureOption(exit.cause)).toMatchObject({ value: { _tag: "DatabaseError" } })
    }
  })

  it("a refused connection does not show the password either", async () => {
    const url = new URL(withPassword())
    url.port = "1"
    const exit = await open(url.toString())
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) expect(Cause.pretty(exit.cause, { renderErrorCause: true })).not.toContain(PASSWORD)
  })
})
