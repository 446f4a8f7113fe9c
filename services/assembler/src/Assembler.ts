/**
 * The assembler: one turn request in, one provider-ready request body and
 * report out. Decodes, validates pairing against the stored history, counts
 * the new messages, checks for loops, assembles, and commits the new messages
 * together with the reply in one transaction (so a retried `turnId` gets the
 * same reply and nothing is ever half-written).
 */
import { Assemble, Knowledge, Models, Normalize, Toolsets, Waste } from "@ctxd/context"
import { Errors, Knowledge as KnowledgeWire, type Loop, type Turn } from "@ctxd/contracts"
import { KnowledgeStore, SessionStore } from "@ctxd/db"
import { Config as LoopConfig, Detector, Judge, Nudge } from "@ctxd/loop-detector"
import { ShardLeases } from "@ctxd/sharding"
import { TokenService } from "@ctxd/token-counter"
import { Context, Effect, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import { Plan, View } from "@ctxd/compactor"
import type { Encoding } from "@ctxd/tokens"
import * as Compaction from "./Compaction.ts"
import * as Decode from "./Decode.ts"
import * as LoopJudge from "./LoopJudge.ts"
import * as SessionCache from "./SessionCache.ts"
import * as TurnMetrics from "./TurnMetrics.ts"

/** Knobs of the assembler (env names in the README). */
export interface AssemblerConfig {
  /** Sessions kept in memory (default 1,000). */
  readonly maxSessions: number
  /** Messages kept in memory over all sessions (default 500,000). */
  readonly maxMessages: number
  /** Defaults for the per-request `options` (a request's own options win). */
  readonly defaults: Turn.Options
  /** Loop-detector defaults (a request's `options.loop` wins field by field). */
  readonly loop: Loop.Settings
  /** Per-tenant defaults (`CTXD_TENANTS_FILE`), between the global defaults and a request's own options. */
  readonly tenants?: Readonly<Record<string, Turn.Options>> | undefined
  /** Toolsets sent from the start when a request does not say (`options.toolsets.defaults`). */
  readonly defaultToolsets?: ReadonlyArray<string> | undefined
  /** Turns of one session that may wait behind the running one before `Busy` (default 64). */
  readonly mailbox?: number | undefined
}

export class AssemblerSettings extends Context.Tag("@ctxd/assembler/AssemblerSettings")<
  AssemblerSettings,
  AssemblerConfig
>() {}

/** How long a worker trusts its copy of an agent's knowledge documents. */
const KNOWLEDGE_TTL_MS = 5_000

/** Recent messages the loop judge sees. */
const JUDGE_MESSAGES = 20

/** How long a turn may wait for a compaction it cannot go without. */
const BLOCKING_COMPACTION_TIMEOUT = "60 seconds"

/** Messages to wait for a scheduled compaction before scheduling again. */
const PENDING_TURNS = 40

/** How many times a turn is re-run after another writer appended to its session. */
const MAX_ATTEMPTS = 3

const requestHash = (request: Turn.TurnRequest): string =>
  createHash("sha256").update(JSON.stringify(request)).digest("hex")

type TurnError = Errors.WireError

/** Global defaults, then the tenant's, then the request's own options (`loop` merged field by field). */
const effectiveOptions = (settings: AssemblerConfig, tenant: string, request: Turn.Options | undefined): Turn.Options => {
  const forTenant = settings.tenants?.[tenant]
  return {
    ...settings.defaults,
    ...forTenant,
    ...request,
    loop: { ...settings.loop, ...forTenant?.loop, ...request?.loop },
  }
}

export class Assembler extends Effect.Service<Assembler>()("@ctxd/assembler/Assembler", {
  scoped: Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    const knowledgeStore = yield* KnowledgeStore.KnowledgeStore
    const tokens = yield* TokenService.TokenService
    const local = tokens.local
    const settings = yield* AssemblerSettings
    const leases = yield* ShardLeases.ShardLeases
    const compaction = yield* Compaction.Compaction
    const judge = yield* LoopJudge.LoopJudge
    const cache = yield* SessionCache.make(settings, leases)

    const unavailable = (error: { readonly _tag: string; readonly message: string }): TurnError =>
      error._tag === "DatabaseUnavailable"
        ? new Errors.ServiceUnavailable({ message: "the session store is unavailable; retry", hint: error.message })
        : new Errors.InternalError({ message: "the session store failed" })

    /** The session's shard is not (or no longer) this worker's: nothing was stored; the owner answers the retry. */
    const notOwner = (shard: number): TurnError =>
      new Errors.NotOwner({
        message: `this worker does not own shard ${shard} (any more); nothing was stored`,
        hint: "retry with the same turnId: the shard's owner answers it",
      })

    /**
     * Knowledge documents per tenant/agent, cached for {@link KNOWLEDGE_TTL_MS}
     * (edits through this worker's endpoint invalidate at once).
     */
    const knowledgeCache = new Map<string, { readonly docs: ReadonlyArray<Knowledge.Doc>; readonly at: number }>()
    const knowledgeOf = (tenant: string, agent: string) => {
      const key = `${tenant}\u0000${agent}`
      const hit = knowledgeCache.get(key)
      if (hit !== undefined && Date.now() - hit.at < KNOWLEDGE_TTL_MS) return Effect.succeed(hit.docs)
      return knowledgeStore.docs(tenant, agent).pipe(
        Effect.tap((docs) =>
          Effect.sync(() => {
            if (knowledgeCache.size >= settings.maxSessions) knowledgeCache.clear()
            knowledgeCache.set(key, { docs, at: Date.now() })
          }),
        ),
        Effect.mapError(unavailable),
      )
    }
    const invalidateKnowledge = (tenant: string, agent: string) =>
      Effect.sync(() => void knowledgeCache.delete(`${tenant}\u0000${agent}`))

    /**
     * The session's live summary: read once per cached session, and again on
     * each turn while a scheduled compaction has not landed (given up after
     * {@link PENDING_TURNS} messages: the next decision schedules anew).
     */
    const liveSummary = (tenant: string, session: string, state: SessionCache.SessionState) => {
      if (state.summaryLoaded && state.compactionPending === undefined) return Effect.succeed(state.summary)
      return Effect.map(compaction.latest(tenant, session), (latest) => {
        state.summaryLoaded = true
        if (latest !== undefined && latest.coversToSeq > (state.summary?.coversToSeq ?? 0)) {
          state.summary = latest
          state.compactionPending = undefined
        } else if (state.compactionPending !== undefined && state.lastSeq - state.compactionPending > PENDING_TURNS) {
          state.compactionPending = undefined
        }
        return state.summary
      })
    }

    /** The history as the model sees it under `summary`, reusing the cached view's prefix. */
    const viewOf = (
      state: SessionCache.SessionState,
      history: ReadonlyArray<Assemble.StoredMessage>,
      summary: View.Summary | undefined,
      encoding: Encoding.Encoding,
    ): View.View =>
      state.view !== undefined && state.view.summary === summary
        ? View.extend(state.view, history)
        : View.applySummary(history, summary, (m) => local.countMessage(m, encoding))

    /**
     * Stored counts are reused while the session's model stays in one token
     * family: Anthropic models (counted exactly or with the calibrated local
     * approximation), or one tiktoken vocabulary. A switch of family recounts
     * the stored history locally, once.
     */
    const familyOf = (model: Turn.Model): string =>
      model.provider === "anthropic" ? "anthropic" : local.encodingFor(model)

    const load = (tenant: string, session: string, state: SessionCache.SessionState, model: Turn.Model) =>
      store.loadMessages(tenant, session, state.lastSeq).pipe(
        Effect.map((rows) => {
          const encoding = local.encodingFor(model)
          return SessionCache.append(
            state,
            rows.map((row) => ({
              seq: row.seq,
              message: row.message,
              tokens: row.encoding === state.family ? row.tokens : local.countMessage(row.message, encoding),
            })),
          )
        }),
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

    /** The loop verdict after this turn's messages, and the nudge to append, if any. */
    const loopCheck = (
      state: SessionCache.SessionState,
      options: Turn.Options,
      fresh: ReadonlyArray<SessionCache.Row>,
      model: Turn.Model,
    ) =>
      Effect.gen(function* () {
        const config = LoopConfig.make(options.loop)
        const folded = Detector.observe(
          state.loop,
          fresh.map((r) => r.message),
          state.messages.length,
        )
        let verdict = config.policy === "off" ? Detector.none : Detector.verdict(folded, config)
        let judged: LoopJudge.Answer | undefined
        if (options.loop?.judge?.enabled === true) {
          const borderline = Judge.borderline(folded, config)
          if (borderline.looping) {
            const recent = state.messages.slice(-JUDGE_MESSAGES).concat(fresh).slice(-JUDGE_MESSAGES)
            judged = yield* judge.ask({
              model,
              judgeModel: options.loop.judge.model,
              borderline,
              recent: recent.map((r) => r.message),
            })
            // The judge sees no progress: flag the loop now rather than one repeat later.
            if (judged.progress === false) verdict = borderline
          }
        }
        const action = Nudge.action(verdict, config.policy)
        const report: Loop.Report = {
          policy: config.policy,
          verdict,
          nudged: action.kind === "nudge",
          escalate: verdict.looping && config.policy !== "off",
          ...(judged === undefined ? {} : { judge: judged }),
        }
        return { report, nudge: action.kind === "nudge" ? Nudge.nudgeText(verdict) : undefined }
      })

    const run = (
      tenant: string,
      session: string,
      request: Turn.TurnRequest,
      hash: string,
      cached: SessionCache.SessionState | undefined,
      attempt: number,
    ): Effect.Effect<readonly [Turn.TurnReply, SessionCache.SessionState | undefined], TurnError> =>
      Effect.gen(function* () {
        const family = familyOf(request.model)
        const state =
          cached !== undefined && cached.family === family
            ? cached
            : yield* load(tenant, session, SessionCache.emptyState(family), request.model)
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
        const options = effectiveOptions(settings, tenant, request.options)
        const requested = normalized.messages.map((n) => n.message)
        const toolsetConfig = {
          defaultToolsets: options.toolsets?.defaults ?? settings.defaultToolsets ?? [],
          includeWriteByDefault: options.toolsets?.includeWrite ?? false,
        }
        const docs = yield* knowledgeOf(tenant, options.agent ?? KnowledgeWire.DEFAULT_AGENT)
        const toolContext = {
          tools: normalized.tools,
          config: toolsetConfig,
          ...(docs.length === 0 ? {} : { knowledge: docs }),
        }
        const knowledgeSection = Knowledge.section(docs)
        const system = knowledgeSection === undefined ? normalized.system : [...normalized.system, knowledgeSection]
        const loaded =
          state.toolsets ??
          Toolsets.replay(
            state.messages.map((m) => m.message),
            toolContext,
          )
        // load_toolset calls are answered here; their results are stored like any other.
        const answered = Toolsets.answerVirtualCalls(requested, loaded, toolContext)
        const messages = answered.messages
        const sent = Toolsets.selectTools(normalized.tools, answered.state, toolsetConfig, docs.length === 0 ? [] : [Knowledge.tool])
        const encoding = local.encodingFor(request.model)
        const waste = Waste.record(state.waste, sent, messages, (tool) => local.countTools([tool], encoding))
        const count = yield* tokens.countTurn({
          model: request.model,
          backend: options.tokenBackend,
          system,
          tools: sent,
          messages,
        })
        const fresh = messages.map((message, i) => ({
          seq: state.lastSeq + 1 + i,
          message,
          tokens: count.messageTokens[i]!,
        }))
        const loop = yield* loopCheck(state, options, fresh, request.model)
        const trailer =
          loop.nudge === undefined ? undefined : { text: loop.nudge, tokens: local.countText(loop.nudge, encoding) }
        const model = Models.resolve(request.model)
        const summary = yield* liveSummary(tenant, session, state)
        const history = state.messages.concat(fresh)
        let view = viewOf(state, history, summary, encoding)
        const fixedTokens = count.systemTokens + count.toolsTokens
        const decision =
          compaction.thresholds === undefined
            ? undefined
            : Plan.decide(Plan.estimate(view.messages, fixedTokens), model.effectiveWindow, compaction.thresholds)
        const job = { tenant, session, afterSeq: summary?.coversToSeq ?? 0, model: request.model, fixedTokens }
        if (decision?.trigger === "background" && state.compactionPending === undefined) {
          yield* compaction.schedule({ ...job, trigger: decision.reason === "hard" ? "hard" : "soft" })
          state.compactionPending = state.lastSeq
        } else if (decision?.trigger === "blocking") {
          yield* compaction.now({ ...job, trigger: "over_window" }, BLOCKING_COMPACTION_TIMEOUT)
          state.summaryLoaded = false
          view = viewOf(state, history, yield* liveSummary(tenant, session, state), encoding)
        }
        // Landmarks and mask grids are positions in the view: a new summary starts them afresh.
        const sameView = state.view !== undefined && state.view.key === view.key
        const assembled = Assemble.assemble({
          tenant,
          session,
          format: request.format,
          model,
          system,
          systemTokens: count.systemTokens,
          tools: sent,
          toolsTokens: count.toolsTokens,
          toolOrder: "given",
          countTools: (tools) => local.countTools(tools, encoding),
          countText: (text) => local.countText(text, encoding),
          history: view.messages,
          landmarks: sameView ? state.landmarks : undefined,
          maskGrid: sameView ? state.maskGrid : undefined,
          proactiveRung: state.rung,
          virtualCalls: answered.calls,
          waste: Waste.report(waste),
          storedTokens: count.messageTokens.reduce((sum, n) => sum + n, state.tokens),
          trailer,
          options: Assemble.resolveOptions({ ...Assemble.optimizationDefaults, ...options }),
          counter: {
            backend: count.backend,
            encoding: count.encoding,
            exact: count.exact,
            calibration: count.calibration,
            ...(count.fallback === undefined ? {} : { fallback: count.fallback }),
          },
        })
        const reply: Turn.TurnReply = {
          ok: true,
          turnId: request.turnId,
          request: assembled.request,
          report: {
            ...assembled.report,
            loop: loop.report,
            ...(decision === undefined
              ? {}
              : {
                  compaction: {
                    summary:
                      view.summary === undefined
                        ? null
                        : {
                            coversFromSeq: view.summary.coversFromSeq,
                            coversToSeq: view.summary.coversToSeq,
                            mode: view.summary.mode,
                            depth: view.summary.depth,
                          },
                    trigger: decision.trigger,
                    utilization: decision.utilization,
                  },
                }),
          },
        }
        const shard = leases.shardOf(tenant, session)
        const fence = yield* leases.fence(shard)
        if (Option.isNone(fence)) return yield* Effect.fail(notOwner(shard))
        const committed = yield* store
          .commitTurn({
            tenant,
            session,
            turnId: request.turnId,
            requestHash: hash,
            expectedLastSeq: state.lastSeq,
            messages: fresh.map((m) => ({ message: m.message, tokens: m.tokens, encoding: family })),
            reply,
            fence: fence.value,
          })
          .pipe(Effect.either)
        if (committed._tag === "Right") {
          SessionCache.append(state, fresh)
          state.landmarks = assembled.landmarks
          state.toolsets = answered.state
          state.waste = waste
          state.maskGrid = assembled.maskGrid
          state.rung = assembled.proactiveRung
          state.view = view
          yield* TurnMetrics.record(reply.report)
          return [reply, state] as const
        }
        const error = committed.left
        switch (error._tag) {
          case "TurnExists":
            // Its messages are stored but maybe not in this cache: drop the entry.
            return [yield* replay(request.turnId, hash, error.stored), undefined] as const
          case "NotOwner":
            // a newer owner may have appended: the cached state is dropped with the failure
            return yield* Effect.fail(notOwner(shard))
          case "SeqConflict":
            if (attempt + 1 >= MAX_ATTEMPTS) {
              return yield* Effect.fail(
                new Errors.ServiceUnavailable({ message: "the session is being written concurrently; retry" }),
              )
            }
            yield* Effect.logDebug("session moved on under us; reloading").pipe(
              Effect.annotateLogs({ actualLastSeq: error.actualLastSeq }),
            )
            return yield* run(tenant, session, request, hash, yield* load(tenant, session, state, request.model), attempt + 1)
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
          .withSession(SessionCache.key(tenant, session), (cached) => run(tenant, session, request, hash, cached, 0))
          .pipe(Effect.annotateLogs({ turn: request.turnId }))
      }).pipe(Effect.annotateLogs({ tenant, session }), Effect.withLogSpan("turn"))

    return { turn, cacheSize: cache.size, invalidateKnowledge } as const
  }),
}) {}

/** Settings from explicit values (tests, embedding). */
export const settingsLayer = (config: Partial<AssemblerConfig> = {}): Layer.Layer<AssemblerSettings> =>
  Layer.succeed(AssemblerSettings, {
    ...config,
    maxSessions: config.maxSessions ?? 1_000,
    maxMessages: config.maxMessages ?? 500_000,
    defaults: config.defaults ?? {},
    loop: config.loop ?? {},
  })
