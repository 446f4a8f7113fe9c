/**
 * Metrics of the turns this worker handles (Effect `Metric`s, read by the
 * worker's `<root>.v1.metrics` endpoint and its Prometheus `/metrics`; the
 * metrics table of docs/operations.md lists them):
 *
 * - `ctxd_turns_total{outcome, backend, exact}`: turns by outcome (`ok`,
 *   `replayed` — an idempotent retry answered from the store — or the error
 *   code in snake case: `bad_request`, `busy`, `conflict`, ...); `backend`
 *   and `exact` are the counter's for `ok` turns and `none` otherwise;
 * - `ctxd_turn_duration_seconds{outcome}`: from the request's decode to the
 *   reply (session mailbox wait included);
 * - `ctxd_tokens_sent_total`, `ctxd_tokens_saved_total{mechanism}` (also
 *   labelled `kind`, its former name, with the same value);
 * - `llm_prompt_tokens_estimated{model}`: the prompt estimate per turn;
 * - loop flags by pattern, virtual calls, tool waste and window utilization.
 *
 * The `model` label is bounded (`MetricLabels`: the first 100 models, then
 * `other`).
 */
import { Errors, type Turn } from "@ctxd/contracts"
import { MetricLabels, Spans } from "@ctxd/observe"
import { Cause, Effect, Exit, Metric, MetricBoundaries, MetricLabel, Option } from "effect"

const turns = Metric.counter("ctxd_turns_total", {
  description:
    "turns handled as the shard's owner, by outcome (ok, replayed, or the error code), with the counter backend and exactness of ok turns (none otherwise)",
  incremental: true,
})
const turnDuration = Metric.histogram(
  "ctxd_turn_duration_seconds",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
  "time from a turn request's decode to its reply, session mailbox wait included, by outcome",
)
const tokensSent = Metric.counter("ctxd_tokens_sent_total", { description: "estimated prompt tokens sent", incremental: true })
const tokensSaved = Metric.counter("ctxd_tokens_saved_total", {
  description:
    "tokens not sent, by mechanism: window (window/budget cuts), masking, compression (tool schemas), thinking (older turns' reasoning)",
  incremental: true,
})
const promptEstimated = Metric.histogram(
  "llm_prompt_tokens_estimated",
  MetricBoundaries.exponential({ start: 256, factor: 2, count: 13 }),
  "estimated prompt tokens per answered turn (report tokens.total), by model",
)
const unknownModels = Metric.counter("ctxd_unknown_model_turns_total", {
  description: "answered turns whose model no row of the model table names (sized and priced by a conservative row), by provider",
  incremental: true,
})
const loopFlags = Metric.counter("ctxd_loop_flags_total", { description: "turns flagged as looping, by pattern", incremental: true })
const virtualCalls = Metric.counter("ctxd_virtual_calls_total", {
  description: "load_toolset / load_knowledge / recall answered",
  incremental: true,
})
const wasteRatio = Metric.histogram(
  "ctxd_tool_waste_ratio",
  MetricBoundaries.linear({ start: 0, width: 0.1, count: 11 }),
  "share of tool-definition tokens sent for tools never called, per turn",
)
const utilization = Metric.histogram(
  "ctxd_window_utilization",
  MetricBoundaries.linear({ start: 0, width: 0.1, count: 11 }),
  "prompt tokens / effective window, per turn",
)

/** A turn's `outcome` label: `ok`, `replayed`, or a wire error code in snake case (`BadRequest` → `bad_request`). */
export type Outcome = string

/** The `outcome` label of a wire error code. */
export const outcomeOf = (code: string): Outcome => code.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()

/**
 * Metrics with labels are updated through the base metric with one label
 * array kept per label set: Effect finds a metric's state by that array's
 * identity (a `WeakMap`), where a `Metric.tagged` metric makes a new array
 * — and so a new metric key, hashed — on every update. The arrays hold the
 * labels in the order `Metric.tagged` would (the same metric keys). A few
 * hundred label sets at most (outcomes, backends, mechanisms, models,
 * patterns); the map is cleared should it ever pass 1,024.
 */
const labelSets = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
const labels = (...pairs: ReadonlyArray<string>): ReadonlyArray<MetricLabel.MetricLabel> => {
  const key = pairs.join("\u0000")
  let set = labelSets.get(key)
  if (set === undefined) {
    if (labelSets.size >= 1_024) labelSets.clear()
    const made: Array<MetricLabel.MetricLabel> = []
    for (let i = 0; i + 1 < pairs.length; i += 2) made.push(MetricLabel.make(pairs[i]!, pairs[i + 1]!))
    labelSets.set(key, (set = made))
  }
  return set
}

/**
 * The updates of a turn are plain calls of the metrics' own `unsafeUpdate`
 * (ctxd sets no fiber metric labels), not an effect per metric.
 */
const NO_LABELS: ReadonlyArray<never> = []
const update = <T, In, Out>(metric: Metric.Metric<T, In, Out>, value: In, set: ReadonlyArray<MetricLabel.MetricLabel> = NO_LABELS) =>
  metric.unsafeUpdate(value, set)

const saved = (mechanism: string, tokens: number) =>
  update(tokensSaved, Math.max(0, tokens), labels("mechanism", mechanism, "kind", mechanism))

/** Records one answered turn's report (a turn committed now, not a replay). */
export const record = (report: Turn.Report): void => {
  const model = MetricLabels.model(report.model)
  update(tokensSent, report.tokens.total)
  saved("window", report.tokens.fullHistory - report.tokens.history - (report.reasoning?.tokensSaved ?? 0))
  saved("masking", report.masking?.tokensSaved ?? 0)
  saved("thinking", report.reasoning?.tokensSaved ?? 0)
  saved("compression", report.tools?.saved ?? 0)
  update(promptEstimated, report.tokens.total, labels("model", model))
  update(virtualCalls, report.virtualCalls?.length ?? 0)
  update(utilization, report.utilization)
  if (report.waste !== undefined) update(wasteRatio, report.waste.ratio)
  if (report.model.known === false) update(unknownModels, 1, labels("provider", report.model.provider))
  for (const f of report.loop?.verdict.findings ?? []) update(loopFlags, 1, labels("pattern", f.pattern))
}

/**
 * Exports `ctxd_turns_total` at zero for `replayed`, every error code and
 * `interrupted` (the outcomes alerts watch), so the series exist from the
 * first scrape; the worker runs it at start.
 */
export const initialize = (): void => {
  for (const outcome of ["replayed", ...Errors.ErrorCode.literals.map(outcomeOf), "interrupted"]) {
    update(turns, 0, labels("outcome", outcome, "backend", "none", "exact", "none"))
  }
}

/**
 * Counts one handled turn in `ctxd_turns_total` and its duration; `report`:
 * the reply's report when the outcome is `ok` (its counter labels the turn).
 */
export const finished = (outcome: Outcome, seconds: number, report?: Turn.Report | undefined): void => {
  const backend = outcome === "ok" && report !== undefined ? report.counter.backend : "none"
  const exact = outcome === "ok" && report !== undefined ? String(report.counter.exact) : "none"
  update(turns, 1, labels("outcome", outcome, "backend", backend, "exact", exact))
  update(turnDuration, seconds, labels("outcome", outcome))
}

/**
 * Runs one turn (`fresh`: committed now, false: a stored reply replayed) in
 * the span `ctxd.turn` (tenant, session, outcome, tokens in — what sending
 * everything would cost — and out, the cache break reason; never prompt
 * text), counting its outcome and duration ({@link finished}).
 */
export const observed = <A extends { readonly reply: Turn.TurnReply; readonly fresh: boolean }>(
  tenant: string,
  session: string,
  turn: Effect.Effect<A, Errors.WireError>,
): Effect.Effect<A, Errors.WireError> =>
  Effect.clockWith((clock) => {
    const started = clock.unsafeCurrentTimeNanos()
    return Effect.flatMap(Effect.exit(turn), (exit) => {
      const seconds = Number(clock.unsafeCurrentTimeNanos() - started) / 1e9
      const outcome = Exit.match(exit, {
        onSuccess: ({ fresh }) => (fresh ? "ok" : "replayed"),
        onFailure: (cause) =>
          Option.match(Cause.failureOption(cause), {
            onSome: (error) => outcomeOf(Errors.codeOf(error)),
            onNone: () => (Cause.isInterruptedOnly(cause) ? "interrupted" : "internal"),
          }),
      })
      const report = Exit.isSuccess(exit) ? exit.value.reply.report : undefined
      finished(outcome, seconds, report)
      return Effect.zipRight(
        Spans.annotate(() => ({
          "ctxd.turn.outcome": outcome,
          ...(report === undefined
            ? {}
            : {
                "ctxd.tokens.in": report.tokens.system + report.tokens.tools + report.tokens.memory + report.tokens.fullHistory,
                "ctxd.tokens.out": report.tokens.total,
                "ctxd.tokens.budget": report.tokens.budget,
                "ctxd.messages.sent": report.messages.sent,
                "ctxd.cache.break_reason": report.cache.reason,
                "ctxd.cache.expected_read_tokens": report.cache.expectedReadTokens,
                "ctxd.compaction.trigger": report.compaction?.trigger,
                "ctxd.counter.backend": report.counter.backend,
              }),
        })),
        exit,
      )
    })
  }).pipe(Spans.span("ctxd.turn", { kind: "server", attributes: { "ctxd.tenant": tenant, "ctxd.session": session } }))

/** Names the decoded request on the turn's span: its id, format, provider and model (never prompt text). */
export const annotateRequest = (request: Turn.TurnRequest): Effect.Effect<void> =>
  Spans.annotate(() => ({
    "ctxd.turn.id": request.turnId,
    "ctxd.format": request.format,
    "gen_ai.system": request.model.provider,
    "gen_ai.request.model": request.model.name,
  }))
