// Postgres TLS and passwords, without a server: `sslmode` (in the URL or
// PGSSLMODE) read as libpq reads it, PGSSLROOTCERT, unusable TLS settings
// refused before any connection without showing the password. Against the
// local server: DatabaseTls.integration.test.ts.
import { Cause, Effect, Exit } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Database } from "../src/index.ts"

const PASSWORD = "pg-secret-7c1d9e2a"

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
