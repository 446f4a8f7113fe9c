// The container half of the published packages' test: @ctxd/testcontainers
// and @ctxd/client installed from their tarballs into a scratch project
// outside the repository, and a TypeScript program there (run by Node 24)
// that starts a stack with `startCtxdStack` (the worker image, built from the
// `ctxd` tarball) and sends it turns. Skips, saying why, where no container
// engine runs or the worker image is not built (the main CI run);
// deploy/ci/containers.sh runs it for real (CTXD_CONTAINER_TESTS=required
// turns a skip into a failure), with the tarballs it built the image from
// (CTXD_PACKAGES_DIR).
import { defaultImage, unavailable } from "@ctxd/testcontainers"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Scratch from "../packages/Scratch.ts"

const skip = await unavailable({ images: [defaultImage()] })
if (skip !== undefined && process.env.CTXD_CONTAINER_TESTS === "required") throw new Error(skip)
if (skip !== undefined) console.warn(`skipping the installed @ctxd/testcontainers test: ${skip}`)

const STACK = `import { ContextClient } from "@ctxd/client"
import { startCtxdStack } from "@ctxd/testcontainers"

const stack = await startCtxdStack({ workers: 1, env: { CTXD_WINDOW_MESSAGES: 60 } })
try {
  const ctxd = await ContextClient.connect({ servers: stack.natsUrl })
  try {
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
    const body = reply.request as { readonly messages: ReadonlyArray<{ readonly content: unknown }> }
    const health = await fetch(new URL("/healthz", stack.workers[0]!.getHttpUrl()))
    console.log(JSON.stringify({ stored: reply.report.messages.stored, contents: body.messages.map((m) => m.content), health: health.status }))
  } finally {
    await ctxd.close()
  }
} finally {
  await stack.stop()
}
`

describe.skipIf(skip !== undefined)("startCtxdStack from the installed @ctxd/testcontainers", () => {
  const work = mkdtempSync(join(tmpdir(), "ctxd-packages-containers-"))
  const app = join(work, "app")

  beforeAll(async () => {
    const { tarballs } = await Scratch.tarballs(join(work, "tarballs"))
    await Scratch.project(app, tarballs, ["@ctxd/testcontainers", "@ctxd/client", "@ctxd/contracts"])
  }, 600_000)
  afterAll(() => Scratch.removeLater(work))

  it("starts NATS, Postgres and a worker container and answers a client's turns", async () => {
    writeFileSync(join(app, "stack.ts"), STACK)
    const ran = await Scratch.run(process.execPath, ["stack.ts"], {
      cwd: app,
      env: Scratch.nodeEnv({ CTXD_WORKER_IMAGE: defaultImage() }),
      timeoutMs: 400_000,
    })
    const last = ran.stdout.trim().split("\n").at(-1)!
    expect(JSON.parse(last)).toEqual({ stored: 3, contents: ["Where is order 42?", "It shipped yesterday.", "Thanks!"], health: 200 })
  }, 450_000)
})
