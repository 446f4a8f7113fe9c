/**
 * `CtxdContainer`: a ctxd worker as a testcontainers `GenericContainer`, with
 * helpers for its configuration (the environment variables of
 * docs/configuration.md). It waits for the worker's "worker ready" log line.
 *
 * ```ts
 * const worker = await new CtxdContainer()
 *   .withNatsUrl("nats://nats:4222")
 *   .withDatabaseUrl("postgresql://ctxd:ctxd@postgres:5432/ctxd")
 *   .withConfig({ CTXD_WINDOW_MESSAGES: 60 })
 *   .withNetwork(network)
 *   .start()
 * ```
 */
import { AbstractStartedContainer, GenericContainer, type StartedTestContainer, type StopOptions, Wait } from "testcontainers"

/** The worker image used when none is given and `CTXD_WORKER_IMAGE` is unset. */
export const DEFAULT_IMAGE = "ctxd-worker:latest"

/** The worker's HTTP port (`CTXD_HTTP_PORT`): `/metrics`, `/healthz`, `/readyz`. */
export const HTTP_PORT = 9464

/** The image `CtxdContainer` starts by default: `CTXD_WORKER_IMAGE`, else {@link DEFAULT_IMAGE}. */
export const defaultImage = (): string => process.env.CTXD_WORKER_IMAGE ?? DEFAULT_IMAGE

/** A configuration value: numbers and booleans are written as the worker reads them. */
export type ConfigValue = string | number | boolean

/** `pino` levels the worker accepts in `LOG_LEVEL`. */
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent"

export class CtxdContainer extends GenericContainer {
  constructor(image: string = defaultImage()) {
    super(image)
    this.withExposedPorts(HTTP_PORT)
      .withEnvironment({ CTXD_HTTP_PORT: String(HTTP_PORT) })
      .withWaitStrategy(Wait.forLogMessage(/worker ready/))
      .withStartupTimeout(120_000)
  }

  /** `NATS_URL`: the NATS server(s) as the container sees them, e.g. `nats://nats:4222`. */
  withNatsUrl(url: string): this {
    return this.withEnvironment({ NATS_URL: url })
  }

  /** `DATABASE_URL`: the Postgres connection string as the container sees it. */
  withDatabaseUrl(url: string): this {
    return this.withEnvironment({ DATABASE_URL: url })
  }

  /** `CTXD_SUBJECT_ROOT`: the first token(s) of every subject (default `ctx`). */
  withSubjectRoot(root: string): this {
    return this.withEnvironment({ CTXD_SUBJECT_ROOT: root })
  }

  /** `CTXD_WORKER_ID`: this worker's id in the cluster (default `<hostname>-<pid>-<hex>`). */
  withWorkerId(id: string): this {
    return this.withEnvironment({ CTXD_WORKER_ID: id })
  }

  /** `LOG_LEVEL` (default `info`). */
  withLogLevel(level: LogLevel): this {
    return this.withEnvironment({ LOG_LEVEL: level })
  }

  /**
   * Any of the worker's environment variables (`CTXD_*`, `ANTHROPIC_BASE_URL`,
   * `OPENAI_BASE_URL`, ...); numbers and booleans are written as strings.
   */
  withConfig(config: Readonly<Record<string, ConfigValue | undefined>>): this {
    const env: Record<string, string> = {}
    for (const [key, value] of Object.entries(config)) if (value !== undefined) env[key] = String(value)
    return this.withEnvironment(env)
  }

  override async start(): Promise<StartedCtxdContainer> {
    return new StartedCtxdContainer(await super.start())
  }
}

export class StartedCtxdContainer extends AbstractStartedContainer {
  constructor(started: StartedTestContainer) {
    super(started)
  }

  /** The worker's HTTP server from the host: `http://<host>:<port>` (`/metrics`, `/healthz`, `/readyz`). */
  getHttpUrl(): string {
    return `http://${this.getHost()}:${this.getMappedPort(HTTP_PORT)}`
  }

  /**
   * Stops the worker gracefully: SIGTERM, then up to `timeout` (default
   * 20 s; the worker's own `CTXD_SHUTDOWN_TIMEOUT_MS` is 10 s) before SIGKILL.
   */
  override stop(options: Partial<StopOptions> = {}) {
    return super.stop({ timeout: 20_000, ...options })
  }
}
