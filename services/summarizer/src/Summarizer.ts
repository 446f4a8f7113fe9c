/**
 * The summarizer: a span of messages (and optionally the previous summary)
 * in, a summary out, in one of three modes (`Summarize.Mode`).
 *
 * Every request fits (lesson 4): the input budget of one call is
 * `(window − output) × (1 − safety margin)` of the summarizer model, counted
 * with the {@link LocalCounter}; each call is checked against it
 * before it is sent. Tool results are cut to `tool_result_max_pct` of that
 * budget. A span whose transcript does not fit is summarized
 * hierarchically: chunks cut on unit boundaries (a tool call stays with its
 * results where the unit fits) are summarized one by one, then the chunk
 * summaries are combined (in groups again while they do not fit) by a
 * final call in the requested mode; `depth` counts the levels (1 = one call).
 *
 * Each provider call is retried `retries` times (default 3) with
 * exponential, jittered backoff from `retryBaseMs` (default 500 ms) on
 * 429, 5xx, timeouts and connection errors; other errors fail at once.
 * In `structured` mode an answer that is not a valid snapshot gets one
 * repair call; if that fails too, the answer's text is kept and
 * `fallback: "invalid_json"` says so.
 */
import { Models, Providers, Units } from "@ctxd/context"
import type { Summarize } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import { type ConfigError, Context, Data, Duration, Effect, Either, Layer, Schedule } from "effect"
import * as Llm from "./Llm.ts"
import * as Prompts from "./Prompts.ts"
import * as Snapshot from "./Snapshot.ts"
import * as SummarizerConfig from "./SummarizerConfig.ts"
import * as Transcript from "./Transcript.ts"

/** What to summarize. */
export interface SummarizeInput {
  /** The span, oldest first, with sequence numbers (labels in the transcript). */
  readonly items: ReadonlyArray<Transcript.Item>
  /** The session's model: the summarizer's when `CTXD_SUMMARIZER_MODEL` is empty. */
  readonly sessionModel: { readonly provider: "anthropic" | "openai" | "google"; readonly name: string }
  /** Default: the configured mode. */
  readonly mode?: Summarize.Mode | undefined
  /** The summary the span continues (rolling over it). */
  readonly previous?: string | undefined
  /** Default: the configured bullets. */
  readonly maxBullets?: number | undefined
  /** The final call's system prompt instead of the mode's (in-process callers: `learn`); the answer is kept as text. */
  readonly instructions?: string | undefined
  /** On whose behalf: the provider key is the tenant's own, the worker's, or none (`ProviderKeys`); undefined: a tenant-less call. */
  readonly tenant?: string | undefined
}

/** What to fold into lessons: a finished session's messages. */
export interface LearnInput {
  readonly items: ReadonlyArray<Transcript.Item>
  readonly sessionModel: SummarizeInput["sessionModel"]
  /** Lessons wanted at most (1–5). */
  readonly max: number
  /** On whose behalf (the provider key, as for `summarize`). */
  readonly tenant?: string | undefined
}

/** The lessons a session gave and what they cost. */
export interface LearnResult {
  readonly lessons: ReadonlyArray<string>
  readonly model: string
  readonly provider: SummarizerConfig.ProviderKind
  readonly tokensIn: number
  readonly tokensOut: number
  readonly calls: number
}

/** A summary and what it cost. */
export interface SummarizeResult {
  readonly text: string
  readonly mode: Summarize.Mode
  readonly depth: number
  readonly model: string
  readonly provider: SummarizerConfig.ProviderKind
  readonly tokensIn: number
  readonly tokensOut: number
  readonly calls: number
  readonly truncatedToolResults: number
  readonly fallback: Summarize.Fallback | null
  readonly snapshot: Summarize.Snapshot | null
}

/** Summarizing failed; nothing was produced. */
export class SummarizeFailed extends Data.TaggedError("SummarizeFailed")<{
  /** `provider`: a call failed after its retries; `too_large`: deeper than `maxDepth`; `empty`: nothing to summarize or an empty answer. */
  readonly reason: "provider" | "too_large" | "empty"
  readonly message: string
  readonly cause?: Llm.ProviderFailed | undefined
}> {}

/** The summarizer model and its limits for a session model. */
export interface Target {
  readonly provider: SummarizerConfig.ProviderKind
  readonly name: string
  readonly contextWindow: number
  /** Output tokens asked for per call. */
  readonly maxOutputTokens: number
  /** Input tokens one call may use (system + prompt). */
  readonly inputBudget: number
}

/** The service. */
export interface SummarizerService {
  readonly config: SummarizerConfig.Config
  readonly target: (sessionModel: SummarizeInput["sessionModel"]) => Target
  readonly summarize: (input: SummarizeInput) => Effect.Effect<SummarizeResult, SummarizeFailed>
  /**
   * Folds a finished session into at most `max` short lessons for its agent
   * (`Prompts.learnSystem`): one call when the transcript fits, else the
   * parts are summarized first (as `summarize` does) and the lessons drawn
   * from their summaries. No lesson (`NONE`) is a result, not a failure.
   */
  readonly learn: (input: LearnInput) => Effect.Effect<LearnResult, SummarizeFailed>
}

/** The summarizer of this process. */
export class Summarizer extends Context.Tag("@ctxd/summarizer/Summarizer")<Summarizer, SummarizerService>() {}

// Room for the per-call framing the local count does not see.
const FRAMING = 64

/** Which model summarizes for `sessionModel`, and its budget (see the module doc). */
export const target = (config: SummarizerConfig.Config, sessionModel: SummarizeInput["sessionModel"]): Target => {
  const configured = config.model !== ""
  const name = configured ? config.model : sessionModel.name
  const provider: SummarizerConfig.ProviderKind = !configured
    ? sessionModel.provider
    : config.provider !== ""
      ? config.provider
      : config.compatible.baseURL !== undefined
        ? "openai_compatible"
        : // the provider whose model names match (OpenAI claims every other name)
          (Providers.byModelName(name) ?? "openai")
  const row = Models.lookup(name)
  const contextWindow = config.contextWindow ?? row.contextWindow
  const maxOutputTokens = Math.max(64, Math.min(config.maxOutputTokens, row.maxOutputTokens, Math.floor(contextWindow / 4)))
  const inputBudget = Math.floor((contextWindow - maxOutputTokens) * (1 - config.safetyMargin)) - FRAMING
  return { provider, name, contextWindow, maxOutputTokens, inputBudget }
}

const range = (blocks: ReadonlyArray<{ readonly seq: number }>): string =>
  blocks.length === 0 ? "" : `${blocks[0]!.seq}–${blocks.at(-1)!.seq}`

/**
 * Groups the rendered messages into chunks of at most `budget` tokens, cut
 * only on unit boundaries; a unit larger than the budget is split between
 * its messages (the summarizer reads text: nothing there can be orphaned).
 */
export const chunk = (
  items: ReadonlyArray<Transcript.Item>,
  blocks: ReadonlyArray<Transcript.Block>,
  budget: number,
): Array<Array<Transcript.Block>> => {
  const chunks: Array<Array<Transcript.Block>> = []
  let current: Array<Transcript.Block> = []
  let used = 0
  const close = () => {
    if (current.length > 0) chunks.push(current)
    current = []
    used = 0
  }
  let start = 0
  while (start < blocks.length) {
    let end = start + 1
    while (end < blocks.length && !Units.isBoundary(items, end)) end++
    const unit = blocks.slice(start, end)
    const cost = unit.reduce((n, b) => n + b.tokens, 0)
    if (used + cost > budget) close()
    if (cost <= budget) {
      current.push(...unit)
      used += cost
    } else {
      for (const block of unit) {
        if (used + block.tokens > budget) close()
        current.push(block)
        used += block.tokens
      }
    }
    start = end
  }
  close()
  return chunks
}

/** Builds the summarizer over the given model port and local counter. */
export const make = (config: SummarizerConfig.Config): Effect.Effect<SummarizerService, never, Llm.Llm | LocalCounter.LocalCounter> =>
  Effect.gen(function* () {
    const llm = yield* Llm.Llm
    const counter = yield* LocalCounter.LocalCounter
    const retry = Schedule.exponential(Duration.millis(config.retryBaseMs)).pipe(
      Schedule.jittered,
      Schedule.intersect(Schedule.recurs(config.retries)),
    )

    const summarize = (input: SummarizeInput): Effect.Effect<SummarizeResult, SummarizeFailed> =>
      Effect.gen(function* () {
        if (input.items.length === 0) return yield* new SummarizeFailed({ reason: "empty", message: "nothing to summarize" })
        const mode = input.mode ?? config.mode
        const bullets = input.maxBullets ?? config.bullets
        const goal = target(config, input.sessionModel)
        const client = llm.client(goal.provider, input.tenant)
        // the vocabulary follows the model name (the provider does not choose it)
        const encoding = counter.encodingFor({ provider: goal.provider, name: goal.name })
        const count: Transcript.CountText = (text) => counter.countText(text, encoding)
        const budget = goal.inputBudget
        const stats = { tokensIn: 0, tokensOut: 0, calls: 0 }

        const call = (system: string, prompt: string, json = false) =>
          Effect.suspend(() => {
            const size = count(system) + count(prompt)
            if (size > budget) {
              return Effect.fail(
                new SummarizeFailed({
                  reason: "too_large",
                  message: `a summarizer call of ${size} tokens exceeds its budget of ${budget}`,
                }),
              )
            }
            return client.complete({ model: goal.name, system, prompt, maxTokens: goal.maxOutputTokens, json }).pipe(
              Effect.tap(() => Effect.sync(() => void stats.calls++)),
              Effect.tapError((e) =>
                Effect.zipRight(
                  Effect.sync(() => void stats.calls++),
                  // the message is the status, the error type and the body's size (Calls.classify): no prompt text
                  Effect.logDebug(`summarizer call (${goal.provider} ${goal.name}, ${size} tokens in) failed: ${e.reason}: ${e.message}`),
                ),
              ),
              Effect.retry({ schedule: retry, while: Llm.isRetryable }),
              Effect.tap((c) =>
                Effect.sync(() => {
                  stats.tokensIn += c.inputTokens
                  stats.tokensOut += c.outputTokens
                }),
              ),
              Effect.map((c) => c.text),
              Effect.mapError(
                (cause) =>
                  new SummarizeFailed({ reason: "provider", message: `${cause.provider} ${cause.reason}: ${cause.message}`, cause }),
              ),
            )
          })

        const finalSystem = input.instructions ?? Prompts.system(mode, bullets)
        // The previous summary may not take more than half the budget (it normally takes a few hundred tokens).
        const previous =
          input.previous === undefined ? undefined : Transcript.truncateMiddle(input.previous, Math.floor(budget / 2), count).text
        const finalOverhead = count(finalSystem) + (previous === undefined ? 0 : count(previous)) + FRAMING
        const chunkBudget = budget - count(Prompts.chunkSystem) - FRAMING
        const blocks = Transcript.render(
          input.items,
          { toolResult: Math.max(16, Math.floor(config.toolResultMaxPct * budget)), text: Math.max(16, Math.floor(chunkBudget * 0.9)) },
          count,
        )
        const truncatedToolResults = blocks.reduce((n, b) => n + b.truncated, 0)
        const total = blocks.reduce((n, b) => n + b.tokens, 0)

        let depth = 1
        let answer: string
        if (total + finalOverhead <= budget) {
          answer = yield* call(
            finalSystem,
            Prompts.spanPrompt(blocks.map((b) => b.text).join("\n\n"), previous, range(blocks)),
            mode === "structured",
          )
        } else {
          if (config.maxDepth < 2) {
            return yield* new SummarizeFailed({
              reason: "too_large",
              message: `the span (${total} tokens) does not fit one call of ${budget}`,
            })
          }
          const chunks = chunk(input.items, blocks, chunkBudget)
          let parts = yield* Effect.forEach(chunks, (c, i) =>
            Effect.map(
              call(Prompts.chunkSystem, Prompts.chunkPrompt(c.map((b) => b.text).join("\n\n"), i + 1, chunks.length, range(c))),
              (text) => ({
                range: range(c),
                text,
              }),
            ),
          )
          depth = 2
          const partCost = (p: { range: string; text: string }) => count(p.text) + 16
          while (parts.reduce((n, p) => n + partCost(p), 0) + finalOverhead > budget) {
            if (depth >= config.maxDepth) {
              return yield* new SummarizeFailed({ reason: "too_large", message: `the span still does not fit after ${depth} levels` })
            }
            const groups: Array<Array<{ range: string; text: string }>> = [[]]
            let used = 0
            for (const p of parts) {
              if (used + partCost(p) > chunkBudget && groups.at(-1)!.length > 0) {
                groups.push([])
                used = 0
              }
              groups.at(-1)!.push(p)
              used += partCost(p)
            }
            parts = yield* Effect.forEach(groups, (g) =>
              Effect.map(call(Prompts.chunkSystem, Prompts.combinePrompt(g, undefined)), (text) => ({
                range: `${g[0]!.range.split("–")[0]}–${g.at(-1)!.range.split("–").at(-1)}`,
                text,
              })),
            )
            depth++
          }
          answer = yield* call(finalSystem, Prompts.combinePrompt(parts, previous), mode === "structured")
        }

        let text: string
        let snapshot: Summarize.Snapshot | null = null
        let fallback: Summarize.Fallback | null = null
        if (input.instructions !== undefined) {
          text = answer.trim()
        } else if (mode === "structured") {
          let parsed = Snapshot.parse(answer)
          if (Either.isLeft(parsed)) {
            const invalid = Transcript.truncateMiddle(answer, Math.floor(budget / 2), count).text
            const repaired = yield* call(Prompts.repairSystem, Prompts.repairPrompt(invalid, parsed.left.message), true)
            const second = Snapshot.parse(repaired)
            if (Either.isRight(second)) parsed = second
          }
          if (Either.isRight(parsed)) {
            snapshot = Snapshot.bound(parsed.right, bullets)
            text = Snapshot.render(snapshot)
          } else {
            fallback = "invalid_json"
            text = answer.trim()
          }
        } else {
          text = mode === "rolling" ? Prompts.boundBullets(answer, bullets) : answer.trim()
        }
        if (text === "") return yield* new SummarizeFailed({ reason: "empty", message: "the summarizer answered with no text" })
        return {
          text,
          mode,
          depth,
          model: goal.name,
          provider: goal.provider,
          tokensIn: stats.tokensIn,
          tokensOut: stats.tokensOut,
          calls: stats.calls,
          truncatedToolResults,
          fallback,
          snapshot,
        }
      }).pipe(Effect.withSpan("Summarizer.summarize", { attributes: { messages: input.items.length } }))

    const learn = (input: LearnInput): Effect.Effect<LearnResult, SummarizeFailed> =>
      summarize({
        items: input.items,
        sessionModel: input.sessionModel,
        mode: "one_shot",
        instructions: Prompts.learnSystem(input.max),
        tenant: input.tenant,
      }).pipe(
        Effect.map((r) => ({
          lessons: Prompts.lessons(r.text, input.max),
          model: r.model,
          provider: r.provider,
          tokensIn: r.tokensIn,
          tokensOut: r.tokensOut,
          calls: r.calls,
        })),
        Effect.withSpan("Summarizer.learn", { attributes: { messages: input.items.length } }),
      )

    return { config, target: (model) => target(config, model), summarize, learn }
  })

/** The summarizer for explicit config; needs the model port and a local counter. */
export const layer = (config: Partial<SummarizerConfig.Config> = {}): Layer.Layer<Summarizer, never, Llm.Llm | LocalCounter.LocalCounter> =>
  Layer.effect(Summarizer, make({ ...SummarizerConfig.defaults, ...config }))

/** The summarizer configured from the environment (`SummarizerConfig.config`); needs the model port and a local counter. */
export const layerConfig: Layer.Layer<Summarizer, ConfigError.ConfigError, Llm.Llm | LocalCounter.LocalCounter> = Layer.effect(
  Summarizer,
  Effect.flatMap(SummarizerConfig.config, make),
)

/** Everything from the environment: the SDK clients, the local counter and the summarizer. */
export const layerAll: Layer.Layer<Summarizer, ConfigError.ConfigError> = layerConfig.pipe(
  Layer.provide(Layer.merge(Llm.layerConfig, LocalCounter.layerConfig)),
)
