/**
 * The assembler: one turn request in, one provider-ready request body and
 * report out. Decodes, validates pairing against the stored history,
 * counts the new messages, assembles, and commits the new messages together
 * with the reply in one transaction (so a retried `turnId` gets the same
 * reply and nothing is ever half-written).
 */
import { Assemble, Models, Normalize } from "@ctxd/context"
import { type Conversation, Errors, type Turn } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { TokenCounter } from "@ctxd/tokens"
import { Context, Effect, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import * as Decode from "./Decode.ts"
import * as SessionCache from "./SessionCache.ts"

/** Knobs of the assembler (env names in the README). */
export interface AssemblerConfig {
  /** Sessions kept in memory (default 1,000). */
  readonly maxSessions: number
  /** Messages kept in memory over all sessions (default 500,000). */
  readonly maxMessages: number
  /** Defaults for the per-request `options` (a request's own options win). */
  readonly defaults: Turn.Options
}

export class AssemblerSettings extends Context.Tag("@ctxd/assembler/AssemblerSettings")<
  AssemblerSettings,
  AssemblerConfig
>() {}

/** How many times a turn is re-run after another writer appended to its session. */
const MAX_ATTEMPTS = 3

const requestHash = (request: Turn.TurnRequest): string =>
  createHash("sha256").update(JSON.stringify(request)).digest("hex")

type TurnError = Errors.WireError

export class Assembler extends Effect.Service<Assembler>()("@ctxd/assembler/Assembler", {
  scoped: Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    const counter = yield* TokenCounter.TokenCounter
    const settings = yield* AssemblerSettings
    const cache = yield* SessionCache.make(settings)

    const unavailable = (error: { readonly _tag: string; readonly message: string }): TurnError =>
      error._tag === "DatabaseUnavailable"
        ? new Errors.ServiceUnavailable({ message: "the session store is unavailable; retry", hint: error.message })
        : new Errors.InternalError({ message: "the session store failed" })

    const countAll = (messages: ReadonlyArray<Conversation.Message>, encoding: TokenCounter.Encoding) =>
      messages.map((message) => counter.countMessage(message, encoding))

    const emptyState = (encoding: string): SessionCache.SessionState => ({
      lastSeq: 0,
      encoding,
      messages: [],
      tokens: 0,
      callIds: new Set(),
      answered: new Set(),
      landmarks: undefined,
    })

    const absorb = (state: SessionCache.SessionState, stored: ReadonlyArray<SessionStore.StoredMessage>) => {
      for (const row of stored) {
        const tokens =
          row.encoding === state.encoding
            ? row.tokens
            : counter.countMessage(row.message, state.encoding as TokenCounter.Encoding)
        state.messages.push({ seq: row.seq, message: row.message, tokens })
        state.tokens += tokens
        Normalize.recordPairing(state.callIds, state.answered, row.message)
        state.lastSeq = row.seq
      }
      return state
    }

    const load = (tenant: string, session: string, state: SessionCache.SessionState) =>
      store.loadMessages(tenant, session, state.lastSeq).pipe(
        Effect.map((rows) => absorb(state, rows)),
        Effect.mapError(unavailable),
      )

    /** A turn id we already answered: the stored reply, or Conflict if the content differs. */
    const replay = (turnId: string, hash: string, stored: SessionStore.StoredTurn) =>
      stored.requestHash === hash
        ? Effect.succeed(stored.reply as Turn.TurnReply)
        : Effect.fail<TurnError>(
            new Errors.TurnConflict({
              message: `turnId ${JSON.stringify(turnId)} was already used with different content`,
              path: "turnId",
              hint: "use a new turnId for a new turn; resend the same content to get the stored reply",
            }),
          )

    const run = (
      tenant: string,
      session: string,
      request: Turn.TurnRequest,
      hash: string,
      cached: SessionCache.SessionState | undefined,
      attempt: number,
    ): Effect.Effect<readonly [Turn.TurnReply, SessionCache.SessionState | undefined], TurnError> =>
      Effect.gen(function* () {
        const encoding = counter.encodingFor(request.model)
        const state =
          cached !== undefined && cached.encoding === encoding
            ? cached
            : yield* load(tenant, session, emptyState(encoding))
        const normalized = Normalize.request(request)
        const pairing = Normalize.findPairingError(state.callIds, state.answered, normalized.messages)
        if (pairing !== undefined) {
          const stored = yield* store.findTurn(tenant, session, request.turnId).pipe(Effect.mapError(unavailable))
          if (Option.isSome(stored)) {
            return [yield* replay(request.turnId, hash, stored.value), state] as const
          }
          return yield* Effect.fail(
            new Errors.BadRequest({ message: pairing.message, path: `messages[${pairing.sourceIndex}]` }),
          )
        }
        const messages = normalized.messages.map((n) => n.message)
        const tokens = countAll(messages, encoding)
        const fresh = messages.map((message, i) => ({ seq: state.lastSeq + 1 + i, message, tokens: tokens[i]! }))
        const history = state.messages.concat(fresh)
        const { request: body, report, landmarks } = Assemble.assemble({
          tenant,
          session,
          format: request.format,
          model: Models.resolve(request.model),
          system: normalized.system,
          systemTokens: counter.countSystem(normalized.system, encoding),
          tools: normalized.tools,
          toolsTokens: counter.countTools(normalized.tools, encoding),
          history,
          landmarks: state.landmarks,
          storedTokens: tokens.reduce((sum, n) => sum + n, state.tokens),
          options: Assemble.resolveOptions({ ...settings.defaults, ...request.options }),
          counter: { backend: counter.backend, encoding, exact: counter.exact },
        })
        const reply: Turn.TurnReply = { ok: true, turnId: request.turnId, request: body, report }
        const committed = yield* store
          .commitTurn({
            tenant,
            session,
            turnId: request.turnId,
            requestHash: hash,
            expectedLastSeq: state.lastSeq,
            messages: messages.map((message, i) => ({ message, tokens: tokens[i]!, encoding })),
            reply,
          })
          .pipe(Effect.either)
        if (committed._tag === "Right") {
          absorb(
            state,
            fresh.map((m) => ({ ...m, encoding })),
          )
          state.landmarks = landmarks
          return [reply, state] as const
        }
        const error = committed.left
        switch (error._tag) {
          case "TurnExists":
            // Its messages are stored but maybe not in this cache: drop the entry.
            return [yield* replay(request.turnId, hash, error.stored), undefined] as const
          case "SeqConflict":
            if (attempt + 1 >= MAX_ATTEMPTS) {
              return yield* Effect.fail(
                new Errors.ServiceUnavailable({ message: "the session is being written concurrently; retry" }),
              )
            }
            yield* Effect.logDebug("session moved on under us; reloading").pipe(
              Effect.annotateLogs({ actualLastSeq: error.actualLastSeq }),
            )
            return yield* run(tenant, session, request, hash, yield* load(tenant, session, state), attempt + 1)
          default:
            return yield* Effect.fail(unavailable(error))
        }
      })

    /** Handles one turn request (raw bytes) for `tenant`/`session`. */
    const turn = (tenant: string, session: string, data: Uint8Array): Effect.Effect<Turn.TurnReply, TurnError> =>
      Effect.gen(function* () {
        const request = yield* Decode.parseJson(data).pipe(Effect.flatMap(Decode.turnRequest))
        const hash = requestHash(request)
        return yield* cache
          .withSession(`${tenant}\u0000${session}`, (cached) => run(tenant, session, request, hash, cached, 0))
          .pipe(Effect.annotateLogs({ turn: request.turnId }))
      }).pipe(Effect.annotateLogs({ tenant, session }), Effect.withLogSpan("turn"))

    return { turn, cacheSize: cache.size } as const
  }),
}) {}

/** Settings from explicit values (tests, embedding). */
export const settingsLayer = (config: Partial<AssemblerConfig> = {}): Layer.Layer<AssemblerSettings> =>
  Layer.succeed(AssemblerSettings, {
    maxSessions: config.maxSessions ?? 1_000,
    maxMessages: config.maxMessages ?? 500_000,
    defaults: config.defaults ?? {},
  })
