/**
 * `ContextClient`: the typed TypeScript client of wire contract v1.
 *
 * `turn` validates the subject tokens, fills in a `turnId` when the caller has
 * none, refuses a request larger than the NATS server (or the configured
 * limit) accepts before sending it, and retries transient failures (no
 * responders, timeouts, `Unavailable`/`NotOwner`/`Busy` replies) with
 * exponential backoff for a bounded time. Retries are safe because the turnId
 * is an idempotency key and every retry reuses it.
 *
 * Large bodies: a request above the server's `max_payload` is put into the
 * JetStream object store bucket `ctxd-payloads-<root>` once and sent as a
 * reference (every retry sends the same reference; the object is deleted
 * when the call ends); a reply that arrives as a reference is fetched,
 * verified (size, sha256) and deleted, so callers only ever see the reply.
 *
 * Sticky routing: the first turn of a session goes to the shared subject
 * (any worker takes it and forwards it to the owner of the session's shard);
 * the reply names the owner's direct subject, and the session's next turns
 * go there, saving the forwarding hop. When the owner answers `NotOwner`
 * (its shard moved) or is gone, the client forgets the route and retries on
 * the shared subject. When the NATS server refuses the direct subject (a
 * tenant's NATS user may publish only to its own tenant's subjects, README
 * "Tenant isolation"), the client turns direct routing off for good and
 * sends the turn, and every later one, to the shared subject.
 *
 * Prefix refs: once a reply names the hashes of a session's `system` and
 * `tools` (`refs`), the session's next turns send `{ref: <hash>}` in their
 * place while they stay the same (the SHA-256 of their JSON text), so a turn
 * carries only its new messages; a worker that does not hold them (it
 * restarted, or took the session over) answers `BadRequest` with path
 * `system.ref` / `tools.ref`, and the client resends the turn in full, once.
 *
 * Effect users provide {@link layer} (it needs a `NatsClient`); everyone else
 * calls {@link connect} and gets Promises.
 */
import { Errors, Health, Session, Subjects, Turn } from "@ctxd/contracts"
import { Json, LargePayload, NatsAuth, NatsClient, PayloadStore, Request } from "@ctxd/nats"
import {
  Cause,
  Clock,
  Config,
  type ConfigError,
  Context,
  Duration,
  Effect,
  Either,
  Exit,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  ParseResult,
  Schedule,
  Schema,
} from "effect"
import { createHash, randomUUID } from "node:crypto"
import * as ClientError from "./ClientError.ts"

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** A turn request as the caller writes it: `turnId` is optional (a UUID is generated when absent). */
export type TurnInput = DistributiveOmit<Turn.TurnRequest, "turnId"> & { readonly turnId?: string | undefined }

/** Client settings. */
export interface ContextClientOptions {
  /** Subject root shared with the workers; default `ctx`. */
  readonly root?: string | undefined
  /** Timeout of one request attempt in ms; default 10 000. */
  readonly timeoutMs?: number | undefined
  /** How long transient failures are retried, in ms from the first attempt; default 10 000. 0 disables retries. */
  readonly retryForMs?: number | undefined
  /**
   * Largest request in bytes, refused locally (`TooLarge`) above it; default
   * `maxRequestBytes`. Requests above the server's `max_payload` go through
   * the object store (see below).
   */
  readonly maxPayload?: number | undefined
  /**
   * Largest request sent through the JetStream object store when it exceeds
   * the server's `max_payload`; default 64 MiB (the workers refuse more than
   * their own `CTXD_MAX_REQUEST_BYTES`).
   */
  readonly maxRequestBytes?: number | undefined
  /** Largest reply body fetched from the object store; default 256 MiB. */
  readonly maxReplyBytes?: number | undefined
  /** Send a session's turns straight to the worker that owns it (learned from replies); default true. */
  readonly direct?: boolean | undefined
  /**
   * Send `{ref}` for a session's `system` and `tools` once a reply named
   * their hashes (`refs`) and they have not changed since; a worker that does
   * not hold them answers `BadRequest` (path `system.ref`/`tools.ref`) and
   * the turn is resent in full, once. Default true.
   */
  readonly refs?: boolean | undefined
}

/** Sessions whose owner the client remembers for direct routing (least recently used forgotten first): 10,000. */
export const MAX_ROUTES = 10_000

const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/** The client. */
export interface ContextClientService {
  readonly subjects: Subjects.Subjects
  /** Sends one turn and returns the provider-ready request and its report. */
  readonly turn: (tenant: string, session: string, request: TurnInput) => Effect.Effect<Turn.TurnReply, ClientError.ClientError>
  /** Asks one worker for its health (one attempt, no retries). */
  readonly health: () => Effect.Effect<Health.HealthReply, ClientError.ClientError>
  /**
   * Deletes every stored row of the session (idempotent: `deleted: false`
   * when there was nothing); its next turn starts a new session. Retried
   * like a turn.
   */
  readonly deleteSession: (tenant: string, session: string) => Effect.Effect<Session.DeleteReply, ClientError.ClientError>
  /**
   * One page of the session's stored data as JSON Lines; send `nextCursor`
   * back for the next page until there is none.
   */
  readonly exportSession: (
    tenant: string,
    session: string,
    page?: { readonly cursor?: string | undefined; readonly limit?: number | undefined },
  ) => Effect.Effect<Session.ExportReply, ClientError.ClientError>
  /** Deletes the tenant's sessions whose turns carried `options.user` = `user` (again while `more`). */
  readonly deleteUser: (tenant: string, user: string) => Effect.Effect<Session.UserDeleteReply, ClientError.ClientError>
}

/** The client as a service. */
export class ContextClient extends Context.Tag("@ctxd/client/ContextClient")<ContextClient, ContextClientService>() {}

const TOO_LARGE_HINT =
  "send fewer/lighter messages per turn, or raise the client's limit (maxPayload / CTXD_MAX_REQUEST_BYTES; " +
  "bodies above the server's max_payload go through the object store, up to the workers' CTXD_MAX_REQUEST_BYTES)"

/** Default largest reply body fetched from the object store: 256 MiB. */
export const DEFAULT_MAX_REPLY_BYTES = 256 * 1024 * 1024

/** A body that could not go through the object store, as a client error. */
const storeError = (error: PayloadStore.PayloadStoreError, what: "request" | "reply"): ClientError.ClientError =>
  error.reason === "Unavailable" || error.reason === "TooLarge"
    ? new ClientError.ClientError({
        code: "TooLarge",
        message: `the ${what} exceeds the NATS max_payload and cannot go through the object store: ${error.message}`,
        hint: "enable JetStream (a worker creates the bucket at start), or raise max_payload",
        retryable: false,
        cause: error,
      })
    : // an expired, vanished or damaged body, or a store timeout: the same turnId again gets a fresh one
      new ClientError.ClientError({ code: "Unavailable", message: error.message, retryable: true, cause: error })

const decodeTurnReply = Schema.decodeUnknownEither(Turn.TurnReply)
const decodeHealthReply = Schema.decodeUnknownEither(Health.HealthReply)
const decodeDeleteReply = Schema.decodeUnknownEither(Session.DeleteReply)
const decodeExportReply = Schema.decodeUnknownEither(Session.ExportReply)
const decodeUserDeleteReply = Schema.decodeUnknownEither(Session.UserDeleteReply)
const decodeErrorReply = Schema.decodeUnknownEither(Schema.Struct({ ok: Schema.Literal(false), error: Schema.Unknown }))
const decodeErrorBody = Schema.decodeUnknownEither(
  Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    path: Schema.optional(Schema.String),
    hint: Schema.optional(Schema.String),
  }),
)
const isErrorCode = Schema.is(Errors.ErrorCode)

/**
 * Reads a reply: `{ok: true}` → `onOk` decodes it; `{ok: false}` → the
 * error it carries (an unknown code is kept as `Internal`); anything else is
 * a malformed reply.
 */
const readReply = <A>(
  data: Uint8Array,
  onOk: (value: unknown) => Either.Either<A, ParseResult.ParseError>,
): Either.Either<A, ClientError.ClientError> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) return Either.left(ClientError.malformedReply(json.left.message))
  const value = json.right
  if (typeof value === "object" && value !== null && (value as { ok?: unknown }).ok === true) {
    return Either.mapLeft(onOk(value), (e) => ClientError.malformedReply(ParseResult.TreeFormatter.formatErrorSync(e)))
  }
  const failed = decodeErrorReply(value)
  if (Either.isLeft(failed)) return Either.left(ClientError.malformedReply('expected {"ok": true|false, ...}'))
  const body = decodeErrorBody(failed.right.error)
  if (Either.isLeft(body)) return Either.left(ClientError.malformedReply("error reply without code and message"))
  const { code, message, path, hint } = body.right
  // a code from a newer server than this client: keep it visible in the message
  const error = isErrorCode(code) ? { code, message } : { code: "Internal" as const, message: `${code}: ${message}` }
  return Either.left(
    ClientError.fromReply({
      ok: false,
      error: { ...error, ...(path === undefined ? {} : { path }), ...(hint === undefined ? {} : { hint }) },
    }),
  )
}

/** A request the server refused to publish on a worker's direct subject (`<root>.v1.worker.<id>.turn...`). */
const isDirectRefused = (cause: unknown): boolean =>
  cause instanceof Request.RequestFailed && Request.isPermissionViolation(cause) && cause.subject.includes(".v1.worker.")

/** The hash a worker names a `system` or `tools` value by (its reply's `refs`): SHA-256, hex, of its JSON text. */
export const refHash = (value: unknown): string => createHash("sha256").update(JSON.stringify(value)).digest("hex")

/** A `system` or `tools` value a worker caches and names by ref: text or a list (not a workspace reference, not a ref). */
const cacheable = (value: unknown): boolean => (typeof value === "string" && value !== "") || Array.isArray(value)

/** A `BadRequest` naming a ref the worker does not hold. */
const isUnknownRef = (error: ClientError.ClientError): boolean =>
  error.code === "BadRequest" && (error.path === "system.ref" || error.path === "tools.ref")

/** Builds the client on the `NatsClient` in context. */
export const make = (options: ContextClientOptions = {}): Effect.Effect<ContextClientService, never, NatsClient.NatsClient> =>
  Effect.gen(function* () {
    const nats = yield* NatsClient.NatsClient
    const subjects = Subjects.make(options.root ?? Subjects.DEFAULT_ROOT)
    const timeoutMs = options.timeoutMs ?? 10_000
    const retryForMs = options.retryForMs ?? 10_000
    // turned off for good once the server refuses a direct subject (the user's NATS permissions)
    let direct = options.direct ?? true
    const maxRequestBytes = options.maxRequestBytes ?? PayloadStore.DEFAULT_MAX_REQUEST_BYTES
    const maxReplyBytes = options.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES
    // opened on first use: the workers create the bucket
    const payloads = yield* PayloadStore.make({
      bucket: PayloadStore.bucketName(subjects.root),
      mode: "open",
      maxRequestBytes,
    }).pipe(Effect.provideService(NatsClient.NatsClient, nats))
    const context = Context.make(NatsClient.NatsClient, nats).pipe(Context.add(PayloadStore.PayloadStore, payloads))
    /** The reply's own bytes, fetched from the object store when it was sent by reference (then deleted there). */
    const body = (msg: { readonly data: Uint8Array; readonly headers?: Request.RequestOptions["headers"] }) =>
      LargePayload.resolve(msg.data, msg.headers, maxReplyBytes).pipe(
        Effect.mapError((error) => storeError(error, "reply")),
        Effect.provide(context),
      )
    // session → the direct subject prefix of the worker that answered its last turn (an LRU)
    const routes = new Map<string, string>()
    const remember = (session: string, prefix: string | undefined) => {
      if (prefix === undefined || !SUBJECT_PREFIX.test(prefix)) return
      routes.delete(session)
      routes.set(session, prefix)
      if (routes.size > MAX_ROUTES) routes.delete(routes.keys().next().value!)
    }

    const limit = (): number => options.maxPayload ?? maxRequestBytes

    // session → the hashes of the system and tools its last reply named (an LRU)
    const useRefs = options.refs ?? true
    const known = new Map<string, NonNullable<Turn.TurnReply["refs"]>>()
    const learn = (session: string, refs: Turn.TurnReply["refs"]) => {
      known.delete(session)
      if (refs === undefined) return
      known.set(session, refs)
      if (known.size > MAX_ROUTES) known.delete(known.keys().next().value!)
    }
    /** `input` with `{ref}` for its system and tools where the session's last reply named them as they are now. */
    const withRefs = (session: string, input: TurnInput): { readonly body: Readonly<Record<string, unknown>>; readonly refs: boolean } => {
      const refs = useRefs ? known.get(session) : undefined
      if (refs === undefined) return { body: input, refs: false }
      const body: Record<string, unknown> = { ...input }
      let sent = false
      for (const kind of ["system", "tools"] as const) {
        const value = input[kind]
        const hash = refs[kind]
        if (hash !== undefined && cacheable(value) && refHash(value) === hash) {
          body[kind] = { ref: hash }
          sent = true
        }
      }
      return { body, refs: sent }
    }

    const attempt = <A>(
      subject: string,
      payload: Uint8Array,
      onOk: (value: unknown) => Either.Either<A, ParseResult.ParseError>,
    ): Effect.Effect<A, ClientError.ClientError> =>
      Request.request(subject, payload, { timeoutMs }).pipe(
        Effect.mapError(ClientError.fromRequestError),
        Effect.flatMap(body),
        Effect.flatMap((data) => readReply(data, onOk)),
        Effect.provide(context),
      )

    /** Exponential backoff (50 ms doubling, at most 1 s, jittered), never sleeping past the deadline. */
    const retrying = <A>(self: Effect.Effect<A, ClientError.ClientError>, what: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (start) => {
        const deadline = start + retryForMs
        const remaining = Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, deadline - now))
        const schedule = Schedule.exponential(Duration.millis(50), 2).pipe(
          Schedule.union(Schedule.spaced(Duration.seconds(1))),
          Schedule.jittered,
          Schedule.modifyDelayEffect((_, delay) => Effect.map(remaining, (left) => Duration.min(delay, Duration.millis(left)))),
        )
        return self.pipe(
          Effect.tapError((error) =>
            error.retryable ? Effect.logDebug(`${what}: ${error.code} (${error.message}); retrying`) : Effect.void,
          ),
          Effect.retry({
            schedule,
            while: (error) => Effect.map(remaining, (left) => error.retryable && left > 0),
          }),
        )
      })

    const turn = (tenant: string, session: string, input: TurnInput): Effect.Effect<Turn.TurnReply, ClientError.ClientError> =>
      Effect.gen(function* () {
        if (!Subjects.isValidToken(tenant)) {
          return yield* ClientError.badRequest(`bad tenant ${JSON.stringify(tenant)}`, {
            hint: "tenant must match [A-Za-z0-9_-]{1,128}",
          })
        }
        if (!Subjects.isValidToken(session)) {
          return yield* ClientError.badRequest(`bad session ${JSON.stringify(session)}`, {
            hint: "session must match [A-Za-z0-9_-]{1,128}",
          })
        }
        const turnId = input.turnId ?? randomUUID()
        const route = `${tenant}.${session}`
        // by ref where the worker named the parts; in full again, once, when it does not hold them
        const out = withRefs(route, input)
        return yield* send(tenant, session, route, turnId, out.body).pipe(
          Effect.catchIf(
            (error) => out.refs && isUnknownRef(error),
            (error) =>
              Effect.logDebug(`turn ${turnId}: ${error.message}; resending in full`).pipe(
                Effect.zipRight(Effect.sync(() => known.delete(route))),
                Effect.zipRight(send(tenant, session, route, turnId, input)),
              ),
          ),
        )
      }).pipe(Effect.annotateLogs({ tenant, session }))

    /** Sends one turn (`fields`, with `turnId`), retrying transient failures. */
    const send = (tenant: string, session: string, route: string, turnId: string, fields: Readonly<Record<string, unknown>>) =>
      Effect.gen(function* () {
        const encoded = Json.encodeEither({ ...fields, turnId })
        if (Either.isLeft(encoded)) {
          return yield* ClientError.badRequest(`the request cannot be encoded as JSON: ${encoded.left.message}`)
        }
        const payload = encoded.right
        const max = limit()
        if (payload.length > max) {
          return yield* new ClientError.ClientError({
            code: "TooLarge",
            message: `the turn request is ${payload.length} bytes; the limit is ${max} bytes`,
            hint: TOO_LARGE_HINT,
            retryable: false,
          })
        }
        const once = (out: LargePayload.Outgoing) =>
          Effect.suspend(() => {
            const prefix = direct ? routes.get(route) : undefined
            const subject = prefix === undefined ? subjects.turn(tenant, session) : `${prefix}.turn.${tenant}.${session}`
            return Request.request(subject, out.payload, { timeoutMs, headers: out.headers }).pipe(
              Effect.mapError(ClientError.fromRequestError),
              Effect.flatMap((msg) =>
                Effect.flatMap(body(msg), (data) =>
                  Effect.map(readReply(data, decodeTurnReply), (reply) => {
                    if (direct) remember(route, msg.headers?.get(Subjects.DIRECT_HEADER))
                    return reply
                  }),
                ),
              ),
              Effect.tapError((error) =>
                Effect.sync(() => {
                  // the owner moved or is gone: back to the shared subject
                  if (prefix !== undefined && error.retryable) routes.delete(route)
                }),
              ),
              Effect.provide(context),
            )
          })
        /** One attempt; on a direct subject this user may not publish to, direct routing off and the shared subject at once. */
        const attemptTurn = (out: LargePayload.Outgoing) =>
          once(out).pipe(
            Effect.catchIf(
              (error) => direct && isDirectRefused(error.cause),
              (error) =>
                Effect.logWarning(`direct routing off: ${error.message} (NATS permissions); using the shared subjects`).pipe(
                  Effect.zipRight(
                    Effect.sync(() => {
                      direct = false
                      routes.clear()
                    }),
                  ),
                  Effect.zipRight(once(out)),
                ),
            ),
          )
        // above the server's max_payload the body goes to the object store once; every attempt sends the reference
        const reply = yield* Effect.acquireUseRelease(
          LargePayload.outgoing(payload, undefined).pipe(
            Effect.mapError((error) => storeError(error, "request")),
            Effect.provide(context),
          ),
          (out) => retrying(attemptTurn(out), `turn ${turnId}`),
          (out) => LargePayload.cleanup(out).pipe(Effect.provide(context)),
        )
        if (reply.turnId !== turnId) {
          return yield* ClientError.malformedReply(`reply for turn ${reply.turnId}, expected ${turnId}`)
        }
        if (useRefs) learn(route, reply.refs)
        return reply
      }).pipe(Effect.annotateLogs({ tenant, session }))

    const health = () => attempt(subjects.health, Json.encode({}), decodeHealthReply)

    /** Checks the subject tokens, then sends `body` with retries (the session ops are idempotent). */
    const sessionOp = <A>(
      tokens: ReadonlyArray<readonly [what: string, value: string]>,
      subject: () => string,
      body: unknown,
      onOk: (value: unknown) => Either.Either<A, ParseResult.ParseError>,
    ): Effect.Effect<A, ClientError.ClientError> =>
      Effect.suspend(() => {
        for (const [what, value] of tokens) {
          if (!Subjects.isValidToken(value)) {
            return ClientError.badRequest(`bad ${what} ${JSON.stringify(value)}`, { hint: `${what} must match [A-Za-z0-9_-]{1,128}` })
          }
        }
        return retrying(attempt(subject(), Json.encode(body), onOk), subject())
      })

    const deleteSession = (tenant: string, session: string) =>
      sessionOp(
        [
          ["tenant", tenant],
          ["session", session],
        ],
        () => subjects.session(tenant, session),
        { op: "delete" },
        decodeDeleteReply,
      )

    const exportSession = (
      tenant: string,
      session: string,
      page: { readonly cursor?: string | undefined; readonly limit?: number | undefined } = {},
    ) =>
      sessionOp(
        [
          ["tenant", tenant],
          ["session", session],
        ],
        () => subjects.session(tenant, session),
        {
          op: "export",
          ...(page.cursor === undefined ? {} : { cursor: page.cursor }),
          ...(page.limit === undefined ? {} : { limit: page.limit }),
        },
        decodeExportReply,
      )

    const deleteUser = (tenant: string, user: string) =>
      sessionOp(
        [
          ["tenant", tenant],
          ["user", user],
        ],
        () => subjects.user(tenant),
        { op: "deleteUser", user },
        decodeUserDeleteReply,
      )

    return { subjects, turn, health, deleteSession, exportSession, deleteUser }
  })

/** {@link make} as a layer. */
export const layer = (options: ContextClientOptions = {}): Layer.Layer<ContextClient, never, NatsClient.NatsClient> =>
  Layer.effect(ContextClient, make(options))

/**
 * The options from the environment: `CTXD_SUBJECT_ROOT` (default `ctx`),
 * `CTXD_CLIENT_TIMEOUT_MS` (default 10 000), `CTXD_CLIENT_RETRY_FOR_MS`
 * (default 10 000), `CTXD_MAX_PAYLOAD` (default: `CTXD_MAX_REQUEST_BYTES`),
 * `CTXD_MAX_REQUEST_BYTES` (default 64 MiB), `CTXD_CLIENT_REFS` (default true:
 * send `{ref}` for an unchanged system and tools).
 */
export const config: Config.Config<ContextClientOptions> = Config.all({
  root: Config.string("CTXD_SUBJECT_ROOT").pipe(Config.withDefault(Subjects.DEFAULT_ROOT)),
  timeoutMs: Config.integer("CTXD_CLIENT_TIMEOUT_MS").pipe(Config.withDefault(10_000)),
  retryForMs: Config.integer("CTXD_CLIENT_RETRY_FOR_MS").pipe(Config.withDefault(10_000)),
  maxPayload: Config.option(Config.integer("CTXD_MAX_PAYLOAD")).pipe(Config.map((o) => (o._tag === "Some" ? o.value : undefined))),
  maxRequestBytes: Config.integer("CTXD_MAX_REQUEST_BYTES").pipe(Config.withDefault(PayloadStore.DEFAULT_MAX_REQUEST_BYTES)),
  refs: Config.boolean("CTXD_CLIENT_REFS").pipe(Config.withDefault(true)),
})

/** {@link layer} configured from the environment (see {@link config}). */
export const layerConfig: Layer.Layer<ContextClient, ConfigError.ConfigError, NatsClient.NatsClient> = Layer.unwrapEffect(
  Effect.map(config, layer),
)

/** The Promise-based client returned by {@link connect}. */
export interface PromiseClient {
  /** Rejects with a {@link ClientError.ClientError}. */
  readonly turn: (tenant: string, session: string, request: TurnInput) => Promise<Turn.TurnReply>
  readonly health: () => Promise<Health.HealthReply>
  readonly deleteSession: (tenant: string, session: string) => Promise<Session.DeleteReply>
  readonly exportSession: (
    tenant: string,
    session: string,
    page?: { readonly cursor?: string | undefined; readonly limit?: number | undefined },
  ) => Promise<Session.ExportReply>
  readonly deleteUser: (tenant: string, user: string) => Promise<Session.UserDeleteReply>
  /** Drains the NATS connection; the client is unusable afterwards. */
  readonly close: () => Promise<void>
}

/** Options of {@link connect}. */
export interface ConnectOptions extends ContextClientOptions {
  /** NATS server URL(s), comma separated in a string; `tls://` requires TLS. */
  readonly servers: string | ReadonlyArray<string>
  /** Connection name; default `ctxd-client`. */
  readonly name?: string | undefined
  /**
   * Prefix of the reply inboxes; default `_INBOX`. Under per-tenant NATS
   * permissions (README, "Tenant isolation") a tenant's runtime sets the
   * prefix its user may subscribe to, e.g. `_INBOX_acme`.
   */
  readonly inboxPrefix?: string | undefined
  /**
   * NATS authentication and TLS, as the workers take them: an options object,
   * or `"env"` to read the workers' variables (`NATS_CREDS`, `NATS_NKEY_SEED`,
   * `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_TLS_CA`/`NATS_TLS_CERT`/
   * `NATS_TLS_KEY`) from this process's environment. Default none.
   */
  readonly auth?: NatsAuth.NatsAuthOptions | "env" | undefined
}

/**
 * Connects and returns a Promise-based client, for callers that do not use
 * Effect. Rejects with `NatsUnavailable` when NATS cannot be reached, with
 * `NatsAuthError` when the auth/TLS options are unusable or the server
 * refuses the credentials. Logs below warning level are dropped.
 */
export const connect = async (options: ConnectOptions): Promise<PromiseClient> => {
  const servers = typeof options.servers === "string" ? options.servers.split(",") : options.servers
  const auth = options.auth === "env" ? await Effect.runPromise(NatsAuth.config) : options.auth
  const runtime = ManagedRuntime.make(
    layer(options).pipe(
      Layer.provideMerge(NatsClient.layer({ servers, name: options.name ?? "ctxd-client", inboxPrefix: options.inboxPrefix, auth })),
      Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)),
    ),
  )
  const run = <A, E>(effect: Effect.Effect<A, E, ContextClient>): Promise<A> =>
    runtime.runPromiseExit(effect).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      throw Cause.squash(exit.cause)
    })
  const started = await Effect.runPromiseExit(runtime.runtimeEffect)
  if (Exit.isFailure(started)) {
    await runtime.dispose()
    throw Cause.squash(started.cause)
  }
  return {
    turn: (tenant, session, request) => run(Effect.flatMap(ContextClient, (c) => c.turn(tenant, session, request))),
    health: () => run(Effect.flatMap(ContextClient, (c) => c.health())),
    deleteSession: (tenant, session) => run(Effect.flatMap(ContextClient, (c) => c.deleteSession(tenant, session))),
    exportSession: (tenant, session, page) => run(Effect.flatMap(ContextClient, (c) => c.exportSession(tenant, session, page))),
    deleteUser: (tenant, user) => run(Effect.flatMap(ContextClient, (c) => c.deleteUser(tenant, user))),
    close: () => runtime.dispose(),
  }
}
