/**
 * One compaction of one session, end to end:
 *
 * 1. Cooldown: after `cooldownAfterFailures` (3) failed compactions in a
 *    row, the session is left alone for `cooldownMs` (10 min) from the last
 *    one (outcome `cooldown`; a manual compaction ignores it). Never a loop.
 * 2. Lease: the session's Postgres lease (TTL `leaseTtlMs`, 300 s, renewed
 *    every third of it while the compaction runs; released at the end, and
 *    when the compaction is interrupted). Held by another: `lock_held`.
 * 3. Plan on the stored history and the live summary: below the soft
 *    threshold a queued job does nothing (`not_needed`); no cut that keeps
 *    the tail and splits no tool pair: `no_boundary`.
 * 4. Summarize the new span on top of the live summary (the summarizer
 *    retries each provider call 3 times with backoff). Failure: `failed`,
 *    nothing written — the history and the live summary are unchanged.
 *    With the `provider` backend the model's API writes it (`ProviderSummary`:
 *    the cut moved back to a user message, the span as the session sends
 *    it, retried like the summarizer's calls); its failure falls back to
 *    ctxd's summarizer for the same cut, so the job fails only when both do.
 * 5. Write the summary only while the lease's fencing token holds (checked
 *    in the write's transaction): `ok`, or `tool_result_truncated` when
 *    tool results were cut for the summarizer; a lost lease: `lock_held`.
 *
 * Every outcome but `cooldown` and `not_needed` is audited
 * (`ctxd_compactions`) and all are counted (`Metrics`).
 */
import { Models } from "@ctxd/context"
import type { Compact, Summarize, Turn } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { Llm, Summarizer } from "@ctxd/summarizer"
import { LocalCounter } from "@ctxd/tokens"
import { Clock, type ConfigError, Context, Data, Duration, Effect, Either, Layer, Option, Schedule } from "effect"
import { type Audit, CompactionStore, type Lease, type StoredSummary } from "./CompactionStore.ts"
import * as Metrics from "./Metrics.ts"
import * as Plan from "./Plan.ts"
import * as ProviderAttempt from "./internal/providerAttempt.ts"
import type * as ProviderSummary from "./ProviderSummary.ts"
import * as CompactorConfig from "./CompactorConfig.ts"
import * as View from "./View.ts"

/** What started a compaction: a turn's decision (`soft`, `hard`, `over_window`) or an operator (`manual`). */
export type Trigger = "soft" | "hard" | "over_window" | "manual"

/** One compaction to run. */
export interface CompactInput {
  readonly tenant: string
  readonly session: string
  /** The session's model (its effective window sizes the tail; it summarizes when no summarizer model is configured). */
  readonly model: Turn.Model
  readonly trigger: Trigger
  /** Default: the summarizer's configured mode. */
  readonly mode?: Summarize.Mode | undefined
  /** System + tools (+ memory) tokens of the session's turns, for the threshold check; default 0. */
  readonly fixedTokens?: number | undefined
  /** Ignore the thresholds and the cooldown; default: true for `manual`. */
  readonly force?: boolean | undefined
  /**
   * The session's request format: its provider compactions are boundaries the
   * cut never crosses; default: any format's (see `Plan.planCut`).
   */
  readonly format?: Turn.Format | undefined
  /**
   * Who writes the summary (default `ctxd`): `provider` asks the session's
   * model's API (`ProviderSummary`) where the model and format have it;
   * when that call fails after its retries, ctxd's summarizer writes it.
   */
  readonly backend?: ProviderSummary.Backend | undefined
}

/** What came of it. */
export interface CompactResult {
  readonly outcome: Compact.Outcome
  /** The summary written (`ok`, `tool_result_truncated`). */
  readonly summary: StoredSummary | undefined
  readonly tokensIn: number
  readonly tokensOut: number
  readonly durationMs: number
  readonly detail: string | undefined
  /** `lock_held`: when the holder's lease runs out; `cooldown`: when the cooldown ends. */
  readonly retryAt: Date | undefined
}

/** The compaction could not run: the session is unknown or Postgres failed. Nothing was written. */
export class CompactionError extends Data.TaggedError("CompactionError")<{
  readonly reason: "unknown_session" | "database"
  readonly message: string
  readonly cause?: unknown
}> {}

/** The service. */
export interface CompactorService {
  readonly config: CompactorConfig.Config
  readonly compact: (input: CompactInput) => Effect.Effect<CompactResult, CompactionError>
}

/** The compactor of this process. */
export class Compactor extends Context.Tag("@ctxd/compactor/Compactor")<Compactor, CompactorService>() {}

/** The wire reply for a result. */
export const toReply = (result: CompactResult): Compact.CompactReply => ({
  ok: true,
  outcome: result.outcome,
  coversFromSeq: result.summary?.coversFromSeq ?? null,
  coversToSeq: result.summary?.coversToSeq ?? null,
  mode: result.summary?.mode ?? null,
  depth: result.summary?.depth ?? null,
  tokensIn: result.tokensIn,
  tokensOut: result.tokensOut,
  durationMs: result.durationMs,
  detail: result.detail ?? null,
})

const database = (cause: { readonly message: string }) =>
  new CompactionError({ reason: "database", message: `compaction store: ${cause.message}`, cause })

/** Builds the compactor. */
export const make = (
  config: CompactorConfig.Config,
): Effect.Effect<
  CompactorService,
  never,
  CompactionStore | SessionStore.SessionStore | Summarizer.Summarizer | LocalCounter.LocalCounter
> =>
  Effect.gen(function* () {
    const store = yield* CompactionStore
    const sessions = yield* SessionStore.SessionStore
    const summarizer = yield* Summarizer.Summarizer
    const counter = yield* LocalCounter.LocalCounter
    const ttl = config.leaseTtlMs
    const llm = Option.getOrUndefined(yield* Effect.serviceOption(Llm.Llm))
    const providerAttempt = ProviderAttempt.make({ llm, sessions, counter, retries: summarizer.config })

    const compact = (input: CompactInput): Effect.Effect<CompactResult, CompactionError> =>
      Effect.gen(function* () {
        const { tenant, session } = input
        const force = input.force ?? input.trigger === "manual"
        const started = yield* Clock.currentTimeMillis
        let tokensIn = 0
        let tokensOut = 0
        const finish = (
          outcome: Compact.Outcome,
          extra: {
            summary?: StoredSummary
            detail?: string
            retryAt?: Date
            audit?: Omit<Audit, "outcome" | "trigger" | "durationMs" | "finishedAt">
          } = {},
        ) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const durationMs = now - started
            if (extra.audit !== undefined) {
              yield* store
                .audit({
                  ...extra.audit,
                  outcome,
                  trigger: input.trigger,
                  durationMs,
                  finishedAt: new Date(now),
                  tokensIn,
                  tokensOut,
                  detail: extra.detail,
                })
                .pipe(Effect.mapError(database))
            }
            yield* Metrics.record(outcome, durationMs, tokensIn, tokensOut)
            yield* Effect.logInfo(`compaction ${outcome}${extra.detail === undefined ? "" : `: ${extra.detail}`}`)
            return { outcome, summary: extra.summary, tokensIn, tokensOut, durationMs, detail: extra.detail, retryAt: extra.retryAt }
          })

        if (!force) {
          const streak = yield* store.failureStreak(tenant, session, config.cooldownAfterFailures).pipe(Effect.mapError(database))
          const last = streak[0]
          if (last !== undefined && started < last.getTime() + config.cooldownMs) {
            const retryAt = new Date(last.getTime() + config.cooldownMs)
            return yield* finish("cooldown", {
              detail: `${streak.length} failed compactions in a row; cooling down until ${retryAt.toISOString()}`,
              retryAt,
            })
          }
        }

        const acquired = yield* Effect.either(store.acquire(tenant, session, config.owner, ttl))
        if (Either.isLeft(acquired)) {
          const e = acquired.left
          if (e._tag === "LockHeld") {
            return yield* finish("lock_held", {
              detail: `${e.message} until ${e.expiresAt.toISOString()}`,
              retryAt: e.expiresAt,
              audit: { sessionId: e.sessionId, owner: config.owner },
            })
          }
          if (e._tag === "UnknownSession") return yield* new CompactionError({ reason: "unknown_session", message: e.message })
          return yield* database(e)
        }

        const run = (lease: Lease) =>
          Effect.gen(function* () {
            const audit = { sessionId: lease.sessionId, owner: config.owner, token: lease.token }
            // Keep the lease while we work; a lost lease shows at the write.
            yield* store.renew(lease, ttl).pipe(
              Effect.catchAll((e) => Effect.logWarning(`compaction lease renewal failed: ${e.message}`)),
              Effect.repeat(Schedule.spaced(Duration.millis(Math.max(50, Math.floor(ttl / 3))))),
              Effect.delay(Duration.millis(Math.max(50, Math.floor(ttl / 3)))),
              Effect.forkScoped,
            )
            const history = yield* sessions.loadMessages(tenant, session, 0).pipe(Effect.mapError(database))
            const live = Option.getOrUndefined(yield* store.latestSummary(tenant, session).pipe(Effect.mapError(database)))
            const model = Models.resolve(input.model)
            const window = model.effectiveWindow
            if (!force) {
              const encoding = counter.encodingFor(model)
              const view = View.applySummary(history, live, (m) => counter.countMessage(m, encoding), input.format)
              const decision = Plan.decide(Plan.estimate(view.messages, input.fixedTokens ?? 0), window, config.thresholds)
              if (decision.trigger === "none") {
                return yield* finish("not_needed", { detail: `utilization ${decision.utilization.toFixed(3)} is below the soft threshold` })
              }
            }
            const blocking = force || input.trigger === "over_window"
            const cut = Plan.planCut(history, live, window, config.thresholds, {
              fixedTokens: input.fixedTokens ?? 0,
              minFoldTokens: blocking ? 0 : Math.floor(config.thresholds.minFoldPct * window),
              format: input.format,
            })
            if (cut._tag === "NoBoundary") return yield* finish("no_boundary", { detail: cut.reason, audit })
            const items = history
              .slice(cut.fromIndex, cut.toIndex)
              .filter((m) => m.message.role !== "system")
              .map((m) => ({ seq: m.seq, message: m.message }))
            const provider = yield* providerAttempt(input, history, live, cut, model)
            if (provider !== undefined && provider._tag === "Right") {
              const p = provider.right
              tokensIn = p.inputTokens
              tokensOut = p.outputTokens
              const range = { coversFromSeq: p.coversFromSeq, coversToSeq: p.coversToSeq }
              const written = yield* Effect.either(
                store.writeSummary(lease, { ...range, text: p.content, mode: "one_shot", depth: 1, block: p.block }),
              )
              const about = { ...audit, ...range, mode: "one_shot" as const, depth: 1, model: model.name, summary: p.content }
              if (Either.isLeft(written)) {
                const e = written.left
                if (e._tag === "LeaseLost") return yield* finish("lock_held", { detail: e.message, audit: about })
                if (e._tag === "NotNewer") return yield* finish("no_boundary", { detail: e.message, audit: about })
                return yield* database(e)
              }
              return yield* finish("ok", {
                summary: written.right,
                detail: `provider-written summary (${model.name}, on-demand compaction)`,
                audit: { ...about, summaryId: written.right.id },
              })
            }
            const fallback = provider === undefined ? undefined : `provider summary failed, ctxd's summarizer wrote it: ${provider.left}`
            const range = { coversFromSeq: cut.coversFromSeq, coversToSeq: cut.coversToSeq }
            const summarized = yield* Effect.either(
              summarizer.summarize({
                items,
                sessionModel: { provider: model.provider, name: model.name },
                mode: input.mode,
                previous: cut.previous?.text,
                tenant,
              }),
            )
            if (Either.isLeft(summarized)) {
              return yield* finish("failed", {
                detail: summarized.left.message,
                audit: { ...audit, ...range, mode: input.mode ?? summarizer.config.mode },
              })
            }
            const s = summarized.right
            tokensIn = s.tokensIn
            tokensOut = s.tokensOut
            const written = yield* Effect.either(
              store.writeSummary(lease, { ...range, text: s.text, mode: s.mode, depth: s.depth, snapshot: s.snapshot }),
            )
            const about = { ...audit, ...range, mode: s.mode, depth: s.depth, model: s.model, summary: s.text }
            if (Either.isLeft(written)) {
              const e = written.left
              if (e._tag === "LeaseLost") return yield* finish("lock_held", { detail: e.message, audit: about })
              if (e._tag === "NotNewer") return yield* finish("no_boundary", { detail: e.message, audit: about })
              return yield* database(e)
            }
            const notes = [
              fallback,
              s.truncatedToolResults > 0 ? `${s.truncatedToolResults} tool result(s) truncated for the summarizer` : undefined,
              s.fallback === null ? undefined : `structured summary fell back to text (${s.fallback})`,
              `${s.calls} summarizer call(s), depth ${s.depth}`,
            ].filter((n) => n !== undefined)
            return yield* finish(s.truncatedToolResults > 0 ? "tool_result_truncated" : "ok", {
              summary: written.right,
              detail: notes.join("; "),
              audit: { ...about, summaryId: written.right.id },
            })
          })

        return yield* Effect.scoped(
          Effect.acquireRelease(Effect.succeed(acquired.right), (lease) =>
            store.release(lease).pipe(
              Effect.timeout(Duration.seconds(5)),
              Effect.catchAll((e) => Effect.logWarning(`compaction lease release failed: ${String(e)}`)),
            ),
          ).pipe(Effect.flatMap(run)),
        )
      }).pipe(
        Effect.annotateLogs({ tenant: input.tenant, session: input.session, trigger: input.trigger }),
        Effect.withSpan("Compactor.compact", { attributes: { tenant: input.tenant, session: input.session, trigger: input.trigger } }),
      )

    return { config, compact }
  })

/** The compactor for explicit config (defaults for what is left out). */
export const layer = (
  config: Partial<CompactorConfig.Config> = {},
): Layer.Layer<Compactor, never, CompactionStore | SessionStore.SessionStore | Summarizer.Summarizer | LocalCounter.LocalCounter> =>
  Layer.effect(Compactor, make({ ...CompactorConfig.defaults, ...config }))

/** The compactor configured from the environment (`CompactorConfig.config`). */
export const layerConfig: Layer.Layer<
  Compactor,
  ConfigError.ConfigError,
  CompactionStore | SessionStore.SessionStore | Summarizer.Summarizer | LocalCounter.LocalCounter
> = Layer.effect(Compactor, Effect.flatMap(CompactorConfig.config, make))
