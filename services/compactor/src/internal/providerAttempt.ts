/**
 * The compactor's call for a provider-written summary (`ProviderSummary`):
 * the cut aligned, the request built from the view and the session's latest
 * prompt, the call retried like the summarizer's, the span it covers.
 */
import type { Models, Pipeline } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import type { SessionStore } from "@ctxd/db"
import { Llm, type SummarizerConfig } from "@ctxd/summarizer"
import type { LocalCounter } from "@ctxd/tokens"
import { Duration, Effect, Either, Option, Schedule } from "effect"
import type * as Plan from "../Plan.ts"
import * as ProviderSummary from "../ProviderSummary.ts"
import type { StoredSummary } from "./compactionModel.ts"

/** The job's part the attempt reads (a `Compactor.CompactInput`). */
export interface Job {
  readonly tenant: string
  readonly session: string
  readonly format?: Turn.Format | undefined
  readonly backend?: ProviderSummary.Backend | undefined
}

/** What the attempt needs from the compactor. */
export interface Deps {
  /** The provider clients (undefined: none in this process; ctxd's summarizer writes every summary). */
  readonly llm: Llm.LlmService | undefined
  readonly sessions: SessionStore.SessionStore
  readonly counter: LocalCounter.LocalCounterService
  readonly retries: Pick<SummarizerConfig.Config, "retries" | "retryBaseMs" | "maxOutputTokens">
}

/** A provider's summary and the span it covers. */
export interface Written extends Llm.ProviderSummary {
  readonly coversFromSeq: number
  readonly coversToSeq: number
}

/**
 * The provider's summary of the cut, when the job asks for the `provider`
 * backend and the model has it: `undefined` when it does not apply (ctxd's
 * summarizer then writes the summary as before), `Left` with why it failed
 * (after the summarizer's retry policy), `Right` the block.
 */
export const make =
  (deps: Deps) =>
  (
    input: Job,
    history: ReadonlyArray<Pipeline.StoredMessage>,
    live: StoredSummary | undefined,
    cut: Plan.Cut,
    model: Models.ResolvedModel,
  ): Effect.Effect<Either.Either<Written, string> | undefined> =>
    Effect.gen(function* () {
      const { llm, sessions, counter, retries } = deps
      if (input.backend !== "provider" || llm === undefined || !ProviderSummary.supports(model.name, input.format)) return undefined
      const client = llm.client("anthropic", input.tenant)
      const aligned = ProviderSummary.alignCut(history, cut.fromIndex, cut.toIndex)
      if (client.compact === undefined || aligned === undefined) return undefined
      // the session's system and tools as its latest prompt sent them (none when that reply is gone)
      const latest = (yield* sessions.listTurns(input.tenant, input.session, 1).pipe(Effect.orElseSucceed(() => [])))[0]
      const stored =
        latest === undefined
          ? undefined
          : Option.getOrUndefined(
              yield* sessions.findTurn(input.tenant, input.session, latest.turnId).pipe(Effect.orElseSucceed(Option.none)),
            )
      const prefix = ProviderSummary.prefixOf(stored?.reply)
      const encoding = counter.encodingFor(model)
      const messages = ProviderSummary.requestMessages(history, live, aligned, model, (m) => counter.countMessage(m, encoding), prefix)
      const retry = Schedule.exponential(Duration.millis(retries.retryBaseMs)).pipe(
        Schedule.jittered,
        Schedule.intersect(Schedule.recurs(retries.retries)),
      )
      const answer = yield* Effect.either(
        client
          .compact({ model: model.name, messages, maxTokens: retries.maxOutputTokens, ...prefix })
          .pipe(Effect.retry({ schedule: retry, while: Llm.isRetryable })),
      )
      if (Either.isLeft(answer)) return Either.left(answer.left.message)
      return Either.right({
        ...answer.right,
        coversFromSeq: cut.previous?.coversFromSeq ?? history[cut.fromIndex]!.seq,
        coversToSeq: history[aligned - 1]!.seq,
      })
    })
