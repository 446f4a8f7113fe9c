// docs/packages.md's example: a service's integration test against a ctxd stack
// (NATS, Postgres, two workers) in containers. Skips, saying why, where no
// container engine runs or the worker image is not built; fails instead when
// CTXD_CONTAINER_TESTS=required (as deploy/ci/containers.sh sets it).
import { ContextClient } from "@ctxd/client"
import { type CtxdStack, defaultImage, startCtxdStack, unavailable } from "@ctxd/testcontainers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const skip = await unavailable({ images: [defaultImage()] })
if (skip !== undefined && process.env.CTXD_CONTAINER_TESTS === "required") throw new Error(skip)
if (skip !== undefined) console.warn(`skipping the ctxd stack example: ${skip}`)

describe.skipIf(skip !== undefined)("a service against a ctxd stack in containers", () => {
  let stack: CtxdStack
  let ctxd: ContextClient.PromiseClient
  beforeAll(async () => {
    stack = await startCtxdStack({ workers: 2, env: { CTXD_WINDOW_MESSAGES: 60 } })
    ctxd = await ContextClient.connect({ servers: stack.natsUrl })
  })
  afterAll(async () => {
    await ctxd?.close()
    await stack?.stop()
  })

  it("keeps a session's history across turns", async () => {
    const model = { provider: "openai", name: "gpt-4o" } as const
    await ctxd.turn("acme", "support-1", { format: "openai", model, messages: [{ role: "user", content: "Where is order 42?" }] })
    const reply = await ctxd.turn("acme", "support-1", {
      format: "openai",
      model,
      messages: [
        { role: "assistant", content: "It shipped yesterday." },
        { role: "user", content: "Thanks!" },
      ],
    })
    // the provider-ready body (OpenAI Chat Completions here)
    const body = reply.request as { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }> }
    expect(body.messages.map((m) => m.content)).toEqual(["Where is order 42?", "It shipped yesterday.", "Thanks!"])
    expect(reply.report.messages.stored).toBe(3)
  })

  it("runs the workers it was asked for, all in one cluster", async () => {
    expect(stack.workers).toHaveLength(2)
    const health = await ctxd.health()
    expect(health.ok).toBe(true)
    expect(health.postgres).toBe(true)
  })
})
