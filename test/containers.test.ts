// The containerized path: NATS and Postgres in containers (testcontainers),
// one worker on the host and one from the worker image (CtxdContainer), in
// one cluster. Skips, saying why, where no container engine is reachable or
// the worker image is not built (as in the main CI run, which has no engine);
// deploy/ci/containers.sh runs it for real, with CTXD_CONTAINER_TESTS=required
// turning a skip into a failure.
import { ContextClient } from "@ctxd/client"
import { WorkerProcess } from "@ctxd/testing"
import { CtxdContainer, defaultImage, type StartedCtxdContainer, unavailable } from "@ctxd/testcontainers"
import { connect } from "@nats-io/transport-node"
import { GenericContainer, Network, type StartedNetwork, type StartedTestContainer, Wait } from "testcontainers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const skip = await unavailable({ images: [defaultImage()] })
if (skip !== undefined && process.env.CTXD_CONTAINER_TESTS === "required") throw new Error(skip)
if (skip !== undefined) console.warn(`skipping the containerized tests: ${skip}`)

const model = { provider: "openai", name: "gpt-4o" } as const
const SESSIONS = 16
/** Short shard leases: the kill test waits for the dead worker's to expire. */
const LEASE_TTL_MS = "6000"

describe.skipIf(skip !== undefined)("a host worker and a worker container against containerized NATS and Postgres", () => {
  let network: StartedNetwork
  let nats: StartedTestContainer
  let postgres: StartedTestContainer
  let hostWorker: WorkerProcess.WorkerProcess
  let containerWorker: StartedCtxdContainer
  let client: ContextClient.PromiseClient
  let natsUrl: string

  beforeAll(async () => {
    network = await new Network().start()
    ;[nats, postgres] = await Promise.all([
      new GenericContainer("nats:2.10-alpine")
        .withNetwork(network)
        .withNetworkAliases("nats")
        .withCommand(["-js"])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage("Server is ready"))
        .start(),
      new GenericContainer("postgres:15-alpine")
        .withNetwork(network)
        .withNetworkAliases("postgres")
        .withEnvironment({ POSTGRES_PASSWORD: "ctxd", POSTGRES_USER: "ctxd", POSTGRES_DB: "ctxd" })
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage("database system is ready to accept connections", 2))
        .start(),
    ])
    natsUrl = `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`
    hostWorker = await WorkerProcess.start({
      NATS_URL: natsUrl,
      DATABASE_URL: `postgresql://ctxd:ctxd@${postgres.getHost()}:${postgres.getMappedPort(5432)}/ctxd`,
      CTXD_WORKER_ID: "host-worker",
      CTXD_HTTP_PORT: "0",
      CTXD_LEASE_TTL_MS: LEASE_TTL_MS,
    })
    containerWorker = await new CtxdContainer()
      .withNetwork(network)
      .withNatsUrl("nats://nats:4222")
      .withDatabaseUrl("postgresql://ctxd:ctxd@postgres:5432/ctxd")
      .withWorkerId("container-worker")
      .withConfig({ CTXD_LEASE_TTL_MS: LEASE_TTL_MS })
      .start()
    client = await ContextClient.connect({ servers: natsUrl, retryForMs: 60_000 })
  }, 240_000)

  afterAll(async () => {
    await client?.close()
    await Promise.allSettled([hostWorker?.stop(), containerWorker?.stop()])
    await Promise.allSettled([nats?.stop(), postgres?.stop()])
    await network?.stop()
  })

  /** The workers that answer `ctx.v1.health` (every worker answers it). */
  const fleet = async (): Promise<Array<{ worker: string; shards?: number }>> => {
    const nc = await connect({ servers: natsUrl })
    const workers: Array<{ worker: string; shards?: number }> = []
    try {
      for await (const m of await nc.requestMany("ctx.v1.health", "", { maxWait: 1_000, strategy: "timer" })) workers.push(m.json())
    } finally {
      await nc.close()
    }
    return workers
  }

  it("answers turns, the two workers sharing the shards", async () => {
    await expect
      .poll(
        async () =>
          (await fleet())
            .filter((w) => (w.shards ?? 0) > 0)
            .map((w) => w.worker)
            .sort(),
        { timeout: 60_000, interval: 500 },
      )
      .toEqual(["container-worker", "host-worker"])
    for (let i = 0; i < SESSIONS; i++) {
      const reply = await client.turn("acme", `c${i}`, {
        turnId: `c${i}-1`,
        format: "openai",
        model,
        messages: [{ role: "user", content: `hi ${i}` }],
      })
      expect(reply.ok).toBe(true)
    }
  })

  it("keeps every session when the worker container is killed", async () => {
    await containerWorker.stop({ timeout: 0 }) // SIGKILL: no handover, its leases have to expire
    for (let i = 0; i < SESSIONS; i++) {
      const reply = await client.turn("acme", `c${i}`, {
        turnId: `c${i}-2`,
        format: "openai",
        model,
        messages: [
          { role: "assistant", content: `hello ${i}` },
          { role: "user", content: `again ${i}` },
        ],
      })
      const body = reply.request as { readonly messages: ReadonlyArray<{ readonly content: unknown }> }
      expect(body.messages.map((m) => m.content)).toEqual([`hi ${i}`, `hello ${i}`, `again ${i}`])
    }
    expect((await fleet()).map((w) => w.worker)).toEqual(["host-worker"])
  }, 120_000)
})
