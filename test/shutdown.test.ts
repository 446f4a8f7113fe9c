// Graceful shutdown: SIGTERM stops taking turns, finishes those in flight,
// drains NATS and exits 0.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
})
afterAll(async () => {
  await h?.close()
})

it("finishes the turns in flight when it gets SIGTERM, then exits 0", async () => {
  const turns = Array.from({ length: 30 }, (_, i) =>
    h.request(h.turnSubject("shut", `s${i}`), {
      turnId: "t1",
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      messages: [{ role: "user", content: `hello ${i} `.repeat(200) }],
    }),
  )
  // Let the requests reach the worker, then ask it to stop.
  await new Promise((resolve) => setTimeout(resolve, 20))
  const exit = h.worker.stop("SIGTERM")
  const replies = await Promise.all(turns)
  expect(replies.every((r) => r.ok === true)).toBe(true)
  expect(await exit).toBe(0)
  expect(h.worker.output()).toContain("shutting down")
  const stored = await h.sql<{ n: string }>("select count(*) as n from ctxd_messages")
  expect(Number(stored[0]!.n)).toBe(30)
})
