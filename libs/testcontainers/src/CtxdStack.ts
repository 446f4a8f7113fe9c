/**
 * `startCtxdStack`: NATS (JetStream, `max_payload` 8 MiB), Postgres and N ctxd
 * workers on one container network — what a team integration-tests its
 * service against. The returned URLs are for the host (the test process);
 * inside the network the workers reach `nats:4222` and `postgres:5432`.
 *
 * ```ts
 * const stack = await startCtxdStack({ workers: 2 })
 * const ctxd = await ContextClient.connect({ servers: stack.natsUrl })
 * // ... your service, pointed at stack.natsUrl ...
 * await ctxd.close()
 * await stack.stop()
 * ```
 */
import { GenericContainer, Network, type StartedNetwork, type StartedTestContainer, Wait } from "testcontainers"
import { type ConfigValue, CtxdContainer, defaultImage, type StartedCtxdContainer } from "./CtxdContainer.ts"

/** NATS configuration of the stack: JetStream on, large turns fit (ctxd's deploy configuration). */
const NATS_CONFIG = ["port: 4222", "http_port: 8222", "max_payload: 8MB", "jetstream {", "  store_dir: /tmp/nats", "}", ""].join("\n")

const POSTGRES = { user: "ctxd", password: "ctxd", database: "ctxd" } as const

export interface CtxdStackOptions {
  /** Worker containers (default 2). */
  readonly workers?: number
  /** Extra worker environment (`CTXD_*`, `LOG_LEVEL`, provider URLs, ...), on top of the stack's own. */
  readonly env?: Readonly<Record<string, ConfigValue | undefined>>
  /** Worker image (default `CTXD_WORKER_IMAGE`, else `ctxd-worker:latest`). */
  readonly image?: string
  /** NATS image (default `nats:2.10-alpine`). */
  readonly natsImage?: string
  /** Postgres image (default `postgres:15-alpine`). */
  readonly postgresImage?: string
  /** How long one container may take to start (default 120 s). */
  readonly startupTimeoutMs?: number
}

export interface CtxdStack {
  /** NATS from the host, e.g. `nats://localhost:32771`. */
  readonly natsUrl: string
  /** Postgres from the host (user, password and database `ctxd`). */
  readonly databaseUrl: string
  /** The containers' network: start your own containers on it to reach `nats:4222` and `postgres:5432`. */
  readonly network: StartedNetwork
  readonly nats: StartedTestContainer
  readonly postgres: StartedTestContainer
  readonly workers: ReadonlyArray<StartedCtxdContainer>
  /** Starts one more worker on the stack (same image and environment). */
  readonly addWorker: (env?: Readonly<Record<string, ConfigValue | undefined>>) => Promise<StartedCtxdContainer>
  /** Stops the workers (gracefully), then NATS, Postgres and the network. */
  readonly stop: () => Promise<void>
}

/** Stops what started, ignoring what fails (a container already gone). */
const stopAll = async (
  workers: ReadonlyArray<StartedCtxdContainer>,
  services: ReadonlyArray<StartedTestContainer | undefined>,
  network: StartedNetwork | undefined,
): Promise<void> => {
  await Promise.allSettled(workers.map((w) => w.stop()))
  await Promise.allSettled(services.flatMap((s) => (s === undefined ? [] : [s.stop()])))
  await network?.stop().catch(() => undefined)
}

export const startCtxdStack = async (options: CtxdStackOptions = {}): Promise<CtxdStack> => {
  const count = options.workers ?? 2
  const startupTimeoutMs = options.startupTimeoutMs ?? 120_000
  const image = options.image ?? defaultImage()
  const network = await new Network().start()
  const workers: Array<StartedCtxdContainer> = []
  let nats: StartedTestContainer | undefined
  let postgres: StartedTestContainer | undefined
  try {
    const started = await Promise.allSettled([
      new GenericContainer(options.natsImage ?? "nats:2.10-alpine")
        .withNetwork(network)
        .withNetworkAliases("nats")
        .withCopyContentToContainer([{ content: NATS_CONFIG, target: "/etc/nats/ctxd.conf" }])
        .withCommand(["-c", "/etc/nats/ctxd.conf"])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage("Server is ready"))
        .withStartupTimeout(startupTimeoutMs)
        .start(),
      new GenericContainer(options.postgresImage ?? "postgres:15-alpine")
        .withNetwork(network)
        .withNetworkAliases("postgres")
        .withEnvironment({ POSTGRES_USER: POSTGRES.user, POSTGRES_PASSWORD: POSTGRES.password, POSTGRES_DB: POSTGRES.database })
        .withExposedPorts(5432)
        // the first start runs a temporary server for initialization, then the real one
        .withWaitStrategy(Wait.forLogMessage("database system is ready to accept connections", 2))
        .withStartupTimeout(startupTimeoutMs)
        .start(),
    ])
    if (started[0].status === "fulfilled") nats = started[0].value
    if (started[1].status === "fulfilled") postgres = started[1].value
    for (const result of started) if (result.status === "rejected") throw result.reason
    const base = {
      NATS_URL: "nats://nats:4222",
      DATABASE_URL: `postgresql://${POSTGRES.user}:${POSTGRES.password}@postgres:5432/${POSTGRES.database}`,
      CTXD_MAX_PAYLOAD: 8 * 1024 * 1024,
      ...options.env,
    }
    const addWorker = async (env: Readonly<Record<string, ConfigValue | undefined>> = {}) => {
      const worker = await new CtxdContainer(image)
        .withNetwork(network)
        .withConfig({ ...base, ...env })
        .withStartupTimeout(startupTimeoutMs)
        .start()
      workers.push(worker)
      return worker
    }
    const results = await Promise.allSettled(Array.from({ length: count }, () => addWorker()))
    for (const result of results) if (result.status === "rejected") throw result.reason
    const natsContainer = nats!
    const postgresContainer = postgres!
    return {
      natsUrl: `nats://${natsContainer.getHost()}:${natsContainer.getMappedPort(4222)}`,
      databaseUrl: `postgresql://${POSTGRES.user}:${POSTGRES.password}@${postgresContainer.getHost()}:${postgresContainer.getMappedPort(5432)}/${POSTGRES.database}`,
      network,
      nats: natsContainer,
      postgres: postgresContainer,
      workers,
      addWorker,
      stop: () => stopAll(workers, [natsContainer, postgresContainer], network),
    }
  } catch (error) {
    await stopAll(workers, [nats, postgres], network)
    throw error
  }
}
