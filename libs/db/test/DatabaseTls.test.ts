// Postgres TLS and passwords: `sslmode` (in the URL or PGSSLMODE) read as
// libpq reads it, PGSSLROOTCERT, unusable TLS settings refused before any
// connection, `require` against the local server (no TLS) failing clearly, and
// a password in DATABASE_URL appearing in no error.
import { Cause, Effect, Exit } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Database } from "../src/index.ts"

const BASE = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres"
const PASSWORD = "pg-secret-7c1d9e2a"
/** The test database's URL with a password (the local server trusts, so any password works). */
const withPassword = (query = "") => {
  const url = new URL(BASE)
  url.password = PASSWORD
  return `${url.toString()}${query}`
}

const dir = mkdtempSync(join(tmpdir(), "ctxd-pg-tls-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const tls = (url: string) => Effect.runSync(Database.tlsOf(Database.connectionUrl(url, {}))) as false | Record<string, unknown>
const tlsObject = (url: string) => {
  const options = tls(url)
  if (options === false) throw new Error(`no TLS for ${url}`)
  return options
}

describe("connectionUrl", () => {
  it("adds PGSSLMODE and PGSSLROOTCERT when the URL does not set them, and libpq semantics", () => {
    const url = "postgresql://u:p@h:5432/db"
    expect(Database.connectionUrl(url, {})).toBe(url)
    expect(Database.connectionUrl(url, { PGSSLMODE: "require", PGSSLROOTCERT: "/ca.pem" })).toBe(
      `${url}?sslmode=require&sslrootcert=%2Fca.pem&uselibpqcompat=true`,
    )
    expect(Database.connectionUrl(`${url}?sslmode=disable`, { PGSSLMODE: "require", PGSSLROOTCERT: "/ca.pem" })).toBe(
      `${url}?sslmode=disable&uselibpqcompat=true`,
    )
    expect(Database.connectionUrl(`${url}?application_name=x`, { PGSSLMODE: "verify-full" })).toBe(
      `${url}?application_name=x&sslmode=verify-full&uselibpqcompat=true`,
    )
    expect(Database.connectionUrl("/var/run/postgresql db", { PGSSLMODE: "require" })).toBe("/var/run/postgresql db")
  })

  it("reads sslmode as libpq does", () => {
    const url = "postgresql://u:p@h:5432/db?sslmode="
    expect(tls(`${url}disable`)).toBe(false)
    expect(tls("postgresql://u:p@h:5432/db")).toBe(false)
    expect(tls(`${url}prefer`)).toEqual({ rejectUnauthorized: false })
    expect(tls(`${url}require`)).toEqual({ rejectUnauthorized: false })
    expect(tls(`${url}verify-full`)).toEqual({})
    const ca = join(dir, "ca.pem")
    writeFileSync(ca, "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    const verifyCa = tlsObject(`${url}verify-ca&sslrootcert=${ca}`)
    expect(verifyCa.ca).toContain("BEGIN CERTIFICATE")
    expect(verifyCa.checkServerIdentity).toBeTypeOf("function")
    // require with a root certificate verifies the chain
    expect(tls(`${url}require&sslrootcert=${ca}`)).toMatchObject({ ca: expect.stringContaining("BEGIN") })
    expect(tlsObject(`${url}require&sslrootcert=${ca}`).rejectUnauthorized).toBeUndefined()
  })

  it("refuses unusable TLS settings without showing the URL's password", () => {
    for (const query of ["?sslmode=verify-ca", `?sslmode=require&sslrootcert=${join(dir, "missing.pem")}`]) {
      const exit = Effect.runSyncExit(Database.tlsOf(Database.connectionUrl(`postgresql://u:${PASSWORD}@h/db${query}`, {})))
      expect(Exit.isFailure(exit)).toBe(true)
      const text = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
      expect(text).toContain("DATABASE_URL is not usable")
      expect(text).not.toContain(PASSWORD)
    }
  })
})

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
