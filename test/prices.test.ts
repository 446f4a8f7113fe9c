// The model price table from CTXD_PRICES_FILE reaches the cache planner of a
// real worker; a bad file stops the worker with an error naming file, row and field.
import { WorkerProcess } from "@ctxd/testing"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const dir = mkdtempSync(join(tmpdir(), "ctxd-prices-"))
const file = join(dir, "prices.json")
// one dated gpt-4o release whose prefix is never long enough to be cached; plain gpt-4o keeps the built-in 1,024
writeFileSync(file, JSON.stringify({ models: [{ match: "gpt-4o-2024-08-06", minCacheableTokens: 100_000_000 }] }))

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start({ CTXD_PRICES_FILE: file })
})
afterAll(async () => {
  await h?.close()
})

const system = "You are a careful assistant. Answer briefly and cite the tool output you rely on. ".repeat(80)
const turn = (name: string, turnId: string, messages: ReadonlyArray<unknown>) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name },
  system,
  messages,
})

/** Two turns of one session; the second's cache report. */
const secondTurnCache = async (name: string, session: string) => {
  const subject = h.turnSubject("acme", session)
  const first = await h.request(subject, turn(name, "t1", [{ role: "user", content: "hi" }]))
  expect(first.ok).toBe(true)
  const second = await h.request(
    subject,
    turn(name, "t2", [
      { role: "assistant", content: "Hello." },
      { role: "user", content: "again" },
    ]),
  )
  expect(second.ok).toBe(true)
  return second.report.cache
}

it("a configured row changes what the planner expects of the cache; other models keep the built-in prices", async () => {
  const builtIn = await secondTurnCache("gpt-4o", "p1")
  expect(builtIn.expectedReadTokens).toBeGreaterThan(1_024)
  const configured = await secondTurnCache("gpt-4o-2024-08-06", "p2")
  expect(configured.expectedReadTokens).toBe(0)
  expect(configured.prefixTokens).toBe(builtIn.prefixTokens)
})

it("refuses to start with an invalid prices file, naming the file, the row and the field", async () => {
  const bad = join(dir, "bad.json")
  writeFileSync(
    bad,
    JSON.stringify({
      models: [
        { match: "claude", inputPerMtok: 1 },
        { match: "gpt-4o", cacheReadMultiplier: 0 },
      ],
    }),
  )
  const started = WorkerProcess.start({ CTXD_SUBJECT_ROOT: "t_never", CTXD_PRICES_FILE: bad }, { readyTimeoutMs: 15_000 })
  await expect(started.then((w) => w.stop())).rejects.toThrow(
    /CTXD_PRICES_FILE \S+bad\.json is not valid: models\[1\] \(match \\"gpt-4o\\"\), field cacheReadMultiplier: Expected a positive number, actual 0/,
  )
})
