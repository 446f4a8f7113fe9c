// A real worker scraped over HTTP before any turn, usage report or
// compaction: the series that alert on rare events are already exported at
// zero (Prometheus: a series that appears only with its first event makes
// rate() and absent() alerts miss it), for every known label value.
import { Compact, Errors } from "@ctxd/contracts"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"
import { freePort, parseExposition } from "./Observability.ts"

let h: Harness.Harness
let base = ""
beforeAll(async () => {
  const port = await freePort()
  base = `http://127.0.0.1:${port}`
  h = await Harness.start({ CTXD_HTTP_PORT: String(port), CTXD_HTTP_HOST: "127.0.0.1" })
})
afterAll(async () => {
  await h?.close()
})

/** The `outcome` label of an error code (`TooLarge` → `too_large`), as the turn metrics write it. */
const outcomeOf = (code: string): string => code.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()

it("exports llm_compaction_triggered_total{outcome} and the error outcomes of ctxd_turns_total at 0 on the first scrape", async () => {
  const res = await fetch(`${base}/metrics`)
  expect(res.status).toBe(200)
  const metrics = parseExposition(await res.text())
  for (const outcome of Compact.Outcome.literals) {
    const found = metrics.find("llm_compaction_triggered_total", { outcome })
    expect(found, `llm_compaction_triggered_total{outcome="${outcome}"}`).toHaveLength(1)
    expect(found[0]!.value).toBe(0)
  }
  for (const code of Errors.ErrorCode.literals) {
    const outcome = outcomeOf(code)
    const found = metrics.find("ctxd_turns_total", { outcome })
    expect(found, `ctxd_turns_total{outcome="${outcome}"}`).toHaveLength(1)
    expect(found[0]!.value).toBe(0)
  }
})
