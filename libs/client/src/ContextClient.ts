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
 * tenant's NATS user may publish only to its own tenant's subjects, docs/security.md
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
import { Subjects, type Tokens, type Turn } from "@ctxd/contracts"
import { Json, LargePayload, NatsAuth, NatsClient, PayloadStore, Request } from "@ctxd/nats"
import {
  Cause,
  Config,
  type ConfigError,
  Context,
  Effect,
  Either,
  Exit,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  type ParseResult,
} from "effect"
import { randomUUID } from "node:crypto"
import * as ClientError from "./ClientError.ts"
import {
  type ConnectOptions,
  type ContextClientOptions,
  type ContextClientService,
  DEFAULT_MAX_REPLY_BYTES,
  MAX_ROUTES,
  type PromiseClient,
  type TurnInput,
} from "./internal/clientModel.ts"
import { isUnknownRef, withRefs } from "./internal/refs.ts"
import {
  decodeDeleteReply,
  decodeExportReply,
  decodeHealthReply,
  decodeTurnReply,
  decodeUsageReply,
  decodeUserDeleteReply,
  isDirectRefused,
  readReply,
  storeError,
} from "./internal/replies.ts"
import * as Retry from "./internal/retry.ts"

export * from "./internal/clientModel.ts"
export { refHash } from "./internal/refs.ts"

const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/** The client as a service. */
export class ContextClient extends Context.Tag("@ctxd/client/ContextClient")<ContextClient, ContextClientService>() {}

const TOO_LARGE_HINT =
  "send fewer/lighter messages per turn, or raise the client's limit (maxPayload / CTXD_MAX_REQUEST_BYTES; " +
  "bodies above the server's max_payload go through the object store, up to the workers' CTXD_MAX_REQUEST_BYTES)"

/** Builds the client on the `NatsClient` in context. */
export const make = (options: ContextClientOptions = {}): Effect.Effect<ContextClientService, never, NatsClient.NatsClient> =>
  Effect.gen(function* () {
    const nats = yield* NatsClient.NatsClient
    const subjects = Subjects.make(options.root ?? Subjects.DEFAULT_ROOT)
    const timeoutMs = options.timeoutMs ?? 10_000
    const retrying = Retry.retrying(options.retryForMs ?? 10_000)
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
        const out = withRefs(input, useRefs ? known.get(route) : undefined)
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

    const usage = (tenant: string, session: string, report: Tokens.UsageReport) =>
      sessionOp(
        [
          ["tenant", tenant],
          ["session", session],
        ],
        () => subjects.usage(tenant, session),
        report,
        decodeUsageReply,
      )

    return { subjects, turn, health, deleteSession, exportSession, deleteUser, usage }
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
  timeoutMs: Config.integer("CTXD_CLIENT_TIMEOUT_MS").pipe(
    Config.withDefault(10_000),
    Config.withDescription("Timeout of one request attempt"),
  ),
  retryForMs: Config.integer("CTXD_CLIENT_RETRY_FOR_MS").pipe(
    Config.withDefault(10_000),
    Config.withDescription("Total time spent retrying no-responders, timeouts, Unavailable, NotOwner and Busy"),
  ),
  maxPayload: Config.option(Config.integer("CTXD_MAX_PAYLOAD")).pipe(Config.map((o) => (o._tag === "Some" ? o.value : undefined))),
  maxRequestBytes: Config.integer("CTXD_MAX_REQUEST_BYTES").pipe(Config.withDefault(PayloadStore.DEFAULT_MAX_REQUEST_BYTES)),
  refs: Config.boolean("CTXD_CLIENT_REFS").pipe(
    Config.withDefault(true),
    Config.withDescription("Send {ref} for an unchanged system and tools once a reply named their hashes (false: always send them whole)"),
  ),
})

/** {@link layer} configured from the environment (see {@link config}). */
export const layerConfig: Layer.Layer<ContextClient, ConfigError.ConfigError, NatsClient.NatsClient> = Layer.unwrapEffect(
  Effect.map(config, layer),
)

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
    usage: (tenant, session, report) => run(Effect.flatMap(ContextClient, (c) => c.usage(tenant, session, report))),
    close: () => runtime.dispose(),
  }
}
