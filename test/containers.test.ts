// The containerized path: NATS and Postgres in containers (testcontainers),
// a worker pointed at them, one turn end to end. Skips, saying why, where no
// container engine is reachable (as on the CI machine, which has none).
import { WorkerProcess } from "@ctxd/testing"
import { connect } from "@nats-io/transport-node"
import { GenericContainer, getContainerRuntimeClient, type StartedTestContainer, Wait } from "testcontainers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const engine = await getContainerRuntimeClient().then(
  () => undefined,
  (error: unknown) => (error instanceof Error ? error.message : String(error)).split("\n")[0],
)
if (engine !== undefined) console.warn(`skipping the containerized tests: no container engine reachable (${engine})`)

describe.skipIf(engine !== undefined)("worker against containerized NATS and Postgres", () => {
  let nats: StartedTestContainer
  let postgres: StartedTestContainer
  let worker: WorkerProcess.WorkerProcess
  beforeAll(async () => {
    ;[nats, postgres] = await Promise.all([
      new GenericContainer("nats:2.10-alpine").withCommand(["-js"]).withExposedPorts(4222).withWaitStrategy(Wait.forLogMessage("Server is ready")).start(),
      new GenericContainer("postgres:15-alpine")
        .withEnvironment({ POSTGRES_PASSWORD: "ctxd", POSTGRES_USER: "ctxd", POSTGRES_DB: "ctxd" })
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage("database system is ready to accept connections", 2))
        .start(),
    ])
    worker = await WorkerProcess.start({
      NATS_URL: `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`,
      DATABASE_URL: `postgresql://ctxd:ctxd@${postgres.getHost()}:${postgres.getMappedPort(5432)}/ctxd`,
    })
  }, 180_000)
  afterAll(async () => {
    await worker?.stop()
    await Promise.all([nats?.stop(), postgres?.stop()])
  })

  it("answers a turn", async () => {
    const nc = await connect({ servers: `nats://${nats.getHost()}:${nats.getMappedPort(4222)}` })
    const reply = await nc.request(
      "ctx.v1.turn.acme.container",
      JSON.stringify({ turnId: "t1", format: "openai", model: { provider: "openai", name: "gpt-4o" }, messages: [{ role: "user", content: "hi" }] }),
      { timeout: 10_000 },
    )
    expect(reply.json<{ ok: boolean }>().ok).toBe(true)
    await nc.drain()
  })
})
