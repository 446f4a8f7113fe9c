// Per-tenant policies from CTXD_TENANTS_FILE sit between the global defaults
// and a request's own options; a bad file stops the worker with a clear error.
import { WorkerProcess } from "@ctxd/testing"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const dir = mkdtempSync(join(tmpdir(), "ctxd-tenants-"))
const file = join(dir, "tenants.json")
writeFileSync(
  file,
  JSON.stringify({
    strict: { toolCompression: "aggressive", loop: { policy: "escalate" } },
    // one of the worker's 4 turn slots (CTXD_MAX_CONCURRENT), where the default share is all of them
    narrow: { share: { turnsPercent: 25 } },
  }),
)

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start({ CTXD_TENANTS_FILE: file })
})
afterAll(async () => {
  await h?.close()
})

const turn = (options?: unknown) => ({
  turnId: "t1",
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  tools: [
    {
      type: "function",
      function: {
        name: "f",
        description: "Does f.",
        parameters: { type: "object", properties: { x: { type: "string", description: "the x" } } },
      },
    },
  ],
  messages: [{ role: "user", content: "hi" }],
  ...(options === undefined ? {} : { options }),
})

it("applies the tenant's defaults, and a request's own options win", async () => {
  const strict = await h.request(h.turnSubject("strict", "s1"), turn())
  expect(strict.report.tools.compression).toBe("aggressive")
  expect(strict.report.loop.policy).toBe("escalate")
  const other = await h.request(h.turnSubject("other", "s1"), turn())
  expect(other.report.tools.compression).toBe("truncate")
  expect(other.report.loop.policy).toBe("nudge")
  const override = await h.request(h.turnSubject("strict", "s2"), turn({ toolCompression: "none" }))
  expect(override.report.tools.compression).toBe("none")
})

it("holds a tenant with its own share to it, and the others to the default", async () => {
  // the narrow tenant's one turn in flight, held at its commit (a session row Postgres holds uncommitted)
  const held = await Harness.hold(h.url, h.schema, [
    { text: "INSERT INTO ctxd_sessions (tenant, session) VALUES ($1, $2)", params: ["narrow", "held"] },
  ])
  try {
    const first = h.request(h.turnSubject("narrow", "held"), turn(), 30_000)
    await held.untilBlocked(1)
    const burst = (tenant: string) =>
      Promise.all(Array.from({ length: 24 }, (_, i) => h.request(h.turnSubject(tenant, `burst${i}`), turn(), 30_000)))
    // with its share in flight, every other turn of the narrow tenant is refused
    const narrow = await burst("narrow")
    for (const r of narrow) {
      expect(r.error?.code).toBe("Busy")
      expect(r.error?.message).toMatch(/tenant narrow holds its share of this worker's turns in flight \(1 of 1\)/)
    }
    // while the others' are not (the default share is every slot)
    const wide = await burst("wide")
    expect(
      wide.every((r) => r.ok === true),
      JSON.stringify(wide.find((r) => r.ok !== true)),
    ).toBe(true)
    await held.release()
    // and the held turn is answered once Postgres lets it commit
    expect((await first).ok).toBe(true)
  } finally {
    await held.release()
  }
})

it("refuses to start with an invalid tenants file, saying why in its own scrubbed JSON log", async () => {
  // a key that also appears in the file's name: the stop reason quotes the name, the log must not quote the key
  const key = "sk-ant-tenantsfile-0123456789"
  const bad = join(dir, `${key}.json`)
  writeFileSync(bad, JSON.stringify({ "bad tenant!": {} }))
  const started = WorkerProcess.start(
    { CTXD_SUBJECT_ROOT: "t_never", CTXD_TENANTS_FILE: bad, ANTHROPIC_API_KEY: key, CTXD_HTTP_PORT: "0" },
    { ready: false },
  )
  const worker = await started
  const code = await new Promise<number | string>((resolve) => worker.child.once("exit", (c, s) => resolve(c ?? s ?? "")))
  expect(code).not.toBe(0)
  const output = worker.output()
  expect(output).not.toContain(key)
  const stop = output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { level: number; msg: string; err?: string })
    .find((line) => line.msg === "the worker stopped")
  expect(stop?.level).toBe(50)
  expect(stop?.err).toMatch(/CTXD_TENANTS_FILE .*\[redacted\]\.json is not valid:\n.*\[redacted\]\.json:1:2: bad tenant!: not a tenant id/)
})
