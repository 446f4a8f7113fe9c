/**
 * The NATS connection as an Effect service. The connection is scoped: it is
 * opened when the layer is built and drained (then closed) when the layer's
 * scope closes. It reconnects forever; status changes are logged, and
 * {@link NatsClientService.connected} follows them (readiness probes).
 */
import { connect, errors, type NatsConnection, type Status } from "@nats-io/transport-node"
import { Config, type ConfigError, Context, Data, Duration, Effect, Either, Layer, type Scope } from "effect"
import * as NatsAuth from "./NatsAuth.ts"

/** The service: one open NATS connection. */
export interface NatsClientService {
  readonly connection: NatsConnection
  /**
   * True while the connection is up: false from a `disconnect` status until
   * the next `reconnect`, and once it is draining or closed. Optional so a
   * service built from a bare connection (tests) still fits; read it with
   * {@link isConnected}.
   */
  readonly connected?: (() => boolean) | undefined
}

/** Whether `client`'s connection is up now (see {@link NatsClientService.connected}). */
export const isConnected = (client: NatsClientService): boolean =>
  !client.connection.isClosed() && !client.connection.isDraining() && (client.connected?.() ?? true)

/** The NATS connection of this process. */
export class NatsClient extends Context.Tag("@ctxd/nats/NatsClient")<NatsClient, NatsClientService>() {}

/** The first connection could not be made in time. */
export class NatsUnavailable extends Data.TaggedError("NatsUnavailable")<{
  readonly message: string
  readonly servers: ReadonlyArray<string>
  readonly cause?: unknown
}> {}

/** How to connect. */
export interface NatsClientOptions {
  /**
   * Server URLs, e.g. `["nats://127.0.0.1:4222"]`; `tls://` requires TLS;
   * credentials in a URL are used as user and password (or token).
   */
  readonly servers: ReadonlyArray<string>
  /** Authentication and TLS (see `NatsAuth`); default none. */
  readonly auth?: NatsAuth.NatsAuthOptions | undefined
  /** Connection name shown by the server (`connz`); default `ctxd`. */
  readonly name?: string
  /** How long the first connection may take; default 5 s. */
  readonly connectTimeoutMs?: number
  /** How long the closing `drain()` may take before the connection is closed hard; default 10 s. */
  readonly drainTimeoutMs?: number
  /**
   * Prefix of this connection's reply inboxes; default nats.js's `_INBOX`. A
   * tenant's runtime under per-tenant NATS permissions sets `_INBOX_<tenant>`
   * (docs/security.md, "Tenant isolation").
   */
  readonly inboxPrefix?: string | undefined
}

const describe = (status: Status): string => {
  switch (status.type) {
    case "disconnect":
    case "reconnect":
    case "ldm":
      return `nats ${status.type}: ${status.server}`
    case "error":
      return `nats error: ${status.error.message}`
    case "update":
      return `nats cluster update: +${(status.added ?? []).join(",")} -${(status.deleted ?? []).join(",")}`
    case "slowConsumer":
      return `nats slow consumer on ${status.sub.getSubject()}: ${status.pending} pending`
    default:
      return `nats ${status.type}`
  }
}

const logStatus = (status: Status): Effect.Effect<void> => {
  switch (status.type) {
    // client pings are routine; reconnect attempts repeat every few seconds
    case "ping":
    case "reconnecting":
      return Effect.logDebug(describe(status))
    case "reconnect":
    case "update":
      return Effect.logInfo(describe(status))
    default:
      return Effect.logWarning(describe(status))
  }
}

/**
 * Logs status changes until the connection closes. Not a `Stream`: closing an
 * async generator that waits inside (`return()`) blocks until its next value,
 * which would deadlock the scope's finalizers; an abandoned `next()` does not.
 */
const watchStatus = (nc: NatsConnection, onStatus: (status: Status) => void): Effect.Effect<void> => {
  const iterator = nc.status()[Symbol.asyncIterator]()
  const loop: Effect.Effect<void> = Effect.tryPromise(() => iterator.next()).pipe(
    Effect.flatMap((next) =>
      next.done === true
        ? Effect.void
        : Effect.zipRight(
            Effect.sync(() => onStatus(next.value)),
            Effect.zipRight(logStatus(next.value), loop),
          ),
    ),
    Effect.catchAll((error) => Effect.logDebug(`nats status stream ended: ${String(error)}`)),
  )
  return loop
}

/**
 * Connects, giving up after `timeoutMs`. A connection that completes after
 * the caller gave up (or was interrupted) is closed, never leaked. Messages
 * show the servers without any credentials in their URLs.
 */
const open = (options: NatsClientOptions, timeoutMs: number): Effect.Effect<NatsConnection, NatsUnavailable | NatsAuth.NatsAuthError> => {
  const resolved = NatsAuth.resolve(options.servers, options.auth)
  if (Either.isLeft(resolved)) return Effect.fail(resolved.left)
  const servers: ReadonlyArray<string> = resolved.right.servers
  const shown = servers.join(",")
  return Effect.async<NatsConnection, NatsUnavailable | NatsAuth.NatsAuthError>((resume) => {
    let abandoned = false
    connect({
      ...resolved.right,
      name: options.name ?? "ctxd",
      maxReconnectAttempts: -1,
      timeout: timeoutMs,
      ...(options.inboxPrefix === undefined ? {} : { inboxPrefix: options.inboxPrefix }),
    }).then(
      (nc) => {
        if (abandoned) void nc.close().catch(() => undefined)
        else resume(Effect.succeed(nc))
      },
      (cause: unknown) => {
        const reason = cause instanceof Error ? cause.message : String(cause)
        resume(
          Effect.fail(
            cause instanceof errors.AuthorizationError
              ? new NatsAuth.NatsAuthError({
                  code: "Rejected",
                  message: `NATS at ${shown} refused the connection's credentials: ${reason}`,
                })
              : new NatsUnavailable({ message: `cannot connect to NATS at ${shown}: ${reason}`, servers, cause }),
          ),
        )
      },
    )
    return Effect.sync(() => {
      abandoned = true
    })
  }).pipe(
    // nats.js has its own `timeout`; this bound also covers a hung DNS lookup or TLS handshake
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs + 1_000),
      onTimeout: () => new NatsUnavailable({ message: `cannot connect to NATS at ${shown}: timed out after ${timeoutMs} ms`, servers }),
    }),
  )
}

/** Drains (bounded), then closes; never fails. */
const release = (nc: NatsConnection, drainTimeoutMs: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (nc.isClosed()) return
    if (!nc.isDraining()) {
      // finalizers run uninterruptibly: the bounded waits must opt back in, or timeouts cannot fire
      yield* Effect.tryPromise(() => nc.drain()).pipe(
        Effect.interruptible,
        Effect.timeout(Duration.millis(drainTimeoutMs)),
        Effect.catchAll((error) => Effect.logWarning(`nats drain did not finish cleanly: ${String(error)}`)),
      )
    }
    if (!nc.isClosed()) {
      yield* Effect.tryPromise(() => nc.close()).pipe(
        Effect.interruptible,
        Effect.timeout(Duration.seconds(2)),
        Effect.catchAll((error) => Effect.logWarning(`nats close failed: ${String(error)}`)),
      )
    }
  })

/** Opens a scoped connection (see {@link layer}). */
export const make = (options: NatsClientOptions): Effect.Effect<NatsClientService, NatsUnavailable | NatsAuth.NatsAuthError, Scope.Scope> =>
  Effect.gen(function* () {
    const connectTimeoutMs = options.connectTimeoutMs ?? 5_000
    const drainTimeoutMs = options.drainTimeoutMs ?? 10_000
    const connection = yield* Effect.acquireRelease(open(options, connectTimeoutMs), (nc) => release(nc, drainTimeoutMs))
    yield* Effect.logInfo(`nats connected to ${connection.getServer()}`)
    let up = true
    const onStatus = (status: Status) => {
      if (status.type === "disconnect" || status.type === "close") up = false
      else if (status.type === "reconnect") up = true
    }
    yield* Effect.forkScoped(watchStatus(connection, onStatus))
    return { connection, connected: () => up }
  }).pipe(Effect.annotateLogs({ nats: options.name ?? "ctxd" }))

/**
 * The connection as a layer: connects with `maxReconnectAttempts: -1`
 * (reconnect forever); fails with {@link NatsUnavailable} if the first
 * connection takes longer than `connectTimeoutMs` (default 5 s), with
 * `NatsAuthError` if the auth/TLS options are unusable or the server refuses
 * the credentials. On release: `drain()` bounded by `drainTimeoutMs` (default
 * 10 s), then `close()`.
 */
export const layer = (options: NatsClientOptions): Layer.Layer<NatsClient, NatsUnavailable | NatsAuth.NatsAuthError> =>
  Layer.scoped(NatsClient, make(options))

/** The servers and connection name, from the environment. */
export const config = Config.all({
  servers: Config.string("NATS_URL").pipe(
    Config.withDefault("nats://127.0.0.1:4222"),
    Config.withDescription("NATS server URL(s), comma separated"),
    Config.map((s) =>
      s
        .split(",")
        .map((u) => u.trim())
        .filter((u) => u.length > 0),
    ),
  ),
  name: Config.string("NATS_NAME").pipe(
    Config.withDefault("ctxd"),
    Config.withDescription("Connection name the NATS server shows for this process (nats server report connections)"),
  ),
  auth: NatsAuth.config,
})

/**
 * {@link layer} configured from the environment: `NATS_URL` (default
 * `nats://127.0.0.1:4222`, comma separated for several servers),
 * `NATS_NAME` (default `ctxd`) and the auth/TLS variables of `NatsAuth.config`.
 */
export const layerConfig: Layer.Layer<NatsClient, NatsUnavailable | NatsAuth.NatsAuthError | ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(config, (c) => layer(c)),
)
