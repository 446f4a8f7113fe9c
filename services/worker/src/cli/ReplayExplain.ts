/**
 * Why a replay's ctxd cost differs from the full history's, from what the
 * replay measured (nothing estimated here): the bill split into its parts
 * (cache reads, cache writes, uncached input, output) for both, the tokens
 * each of ctxd's stages left out (its own per-turn report, summed), the
 * cache breaks and the prefix edits held back, the prompts too short to be
 * cached, and the flaws of the input worked around (`Replay.Repair`). The
 * terminal table and the HTML page say the same sentences ({@link reasons}).
 */
import { CostModel } from "@ctxd/context"
import type * as Replay from "./Replay.ts"

/** One replay: the model's setup, its sessions and their sums. */
export interface Run {
  readonly setup: Replay.Setup
  readonly sessions: ReadonlyArray<Replay.SessionResult>
  readonly total: Replay.Totals
}

/** A bill by part, USD. */
export interface Parts {
  readonly reads: number
  readonly writes: number
  readonly uncached: number
  readonly output: number
}

/** What the stages are called in a sentence (`Pipeline.STAGES`). */
export const STAGE_LABELS: Readonly<Record<string, string>> = {
  window: "the message window (oldest messages left out)",
  compress: "tool schema compression",
  mask: "masking of old tool results",
  budget: "the token budget cut",
  prune: "removing unpaired tool calls",
  thinking: "leaving out old reasoning",
  render: "rendering",
  proactive: "proactive compression",
}

/** What the cache-break reasons mean (`Turn.CacheBreakReason`). */
export const BREAK_LABELS: Readonly<Record<string, string>> = {
  window: "by the window moving on",
  mask: "by masking older tool results",
  summary: "by a summary replacing old messages",
  tools: "by a change of the tool list",
  system: "by a change of the system prompt",
  knowledge: "by loading knowledge",
  budget: "by the budget cut",
  ttl_expired: "by an expired cache entry",
}

/** The measured reasons of one run. */
export interface Why {
  readonly parts: { readonly ctxd: Parts; readonly full: Parts }
  /** Cache reads / input tokens of the full-history prompts. */
  readonly fullCacheHit: number
  /** Tokens left out by stage, the most first (positive only). */
  readonly leftOut: ReadonlyArray<readonly [string, number]>
  /** Turns a prefix edit was held back on, by edit. */
  readonly deferred: ReadonlyArray<readonly [string, number]>
  readonly breaks: ReadonlyArray<readonly [string, number]>
  /** ctxd prompts and full-history prompts under the model's minimum cacheable length. */
  readonly uncacheable: { readonly ctxd: number; readonly full: number; readonly min: number }
  readonly repaired: ReadonlyArray<Replay.SessionResult>
  readonly rejected: ReadonlyArray<Replay.SessionResult>
}

/** A bill's parts in USD (they add up to `CostModel.cost`). */
export const partsOf = (prices: CostModel.ModelPrices, u: CostModel.Usage): Parts => {
  const usd = (units: number) => (units * prices.inputPerMtok) / 1e6
  return {
    reads: usd(u.cacheRead * prices.cacheReadMultiplier),
    writes: usd(CostModel.inputUnits(prices, { ...u, cacheRead: 0, uncached: 0 })),
    uncached: usd(u.uncached),
    output: (u.output * prices.outputPerMtok) / 1e6,
  }
}

const addParts = (a: Parts, b: Parts): Parts => ({
  reads: a.reads + b.reads,
  writes: a.writes + b.writes,
  uncached: a.uncached + b.uncached,
  output: a.output + b.output,
})
const NO_PARTS: Parts = { reads: 0, writes: 0, uncached: 0, output: 0 }

const sorted = (counts: Record<string, number>): Array<readonly [string, number]> =>
  Object.entries(counts)
    .filter(([, n]) => n > 0)
    .sort(([, a], [, b]) => b - a)

/** The reasons of `run`, summed over its turns. */
export const explain = (run: Run): Why => {
  const { prices } = run.setup
  const turns = run.sessions.flatMap((s) => s.turns)
  const leftOut: Record<string, number> = {}
  const deferred: Record<string, number> = {}
  let ctxd = NO_PARTS
  let full = NO_PARTS
  let fullRead = 0
  let fullInput = 0
  for (const t of turns) {
    ctxd = addParts(ctxd, partsOf(prices, t.ctxd.usage))
    full = addParts(full, partsOf(prices, t.full.usage))
    fullRead += t.full.usage.cacheRead
    fullInput += t.full.usage.cacheRead + CostModel.written(t.full.usage) + t.full.usage.uncached
    for (const [stage, n] of Object.entries(t.leftOut)) if (stage !== "render") leftOut[stage] = (leftOut[stage] ?? 0) + n
    for (const edit of t.deferred) deferred[edit] = (deferred[edit] ?? 0) + 1
  }
  const min = prices.minCacheableTokens
  return {
    parts: { ctxd, full },
    fullCacheHit: fullRead / Math.max(1, fullInput),
    leftOut: sorted(leftOut),
    deferred: sorted(deferred),
    breaks: sorted({ ...run.total.breaks }),
    uncacheable: { ctxd: turns.filter((t) => t.ctxd.tokens < min).length, full: turns.filter((t) => t.full.tokens < min).length, min },
    repaired: run.sessions.filter((s) => s.repairs.length > 0),
    rejected: run.sessions.filter((s) => s.rejected !== undefined),
  }
}

/** USD as the reports print it. */
export const usd = (n: number): string => `$${n < 10 ? n.toFixed(4) : n.toFixed(2)}`
export const pct = (n: number): string => `${(100 * n).toFixed(1)} %`
export const int = (n: number): string => Math.round(n).toLocaleString("en")

/** `ours` against `theirs` in words: `23.2 % less`, `1.0 % more`, `the same`. */
export const versus = (ours: number, theirs: number): string => {
  const change = ours / Math.max(1e-12, theirs) - 1
  return Math.abs(change) < 0.0005 ? "the same" : `${pct(Math.abs(change))} ${change < 0 ? "less" : "more"}`
}

const list = (items: ReadonlyArray<string>): string =>
  items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`

/** What the log lacked in one session, in words. */
export const repairText = (s: Replay.SessionResult): string => {
  const calls = s.repairs.filter((r) => r.kind === "call without result")
  const results = s.repairs.filter((r) => r.kind === "result without call")
  const named = (rs: ReadonlyArray<Replay.Repair>) =>
    rs
      .slice(0, 3)
      .map((r) => (r.tool === "" ? `turn ${r.turn}: result for ${r.callId}` : `turn ${r.turn}: call ${r.callId} to ${r.tool}`))
      .join(", ") + (rs.length > 3 ? ", …" : "")
  return list([
    ...(calls.length === 0 ? [] : [`${calls.length} tool call${calls.length === 1 ? "" : "s"} without a result (${named(calls)})`]),
    ...(results.length === 0 ? [] : [`${results.length} result${results.length === 1 ? "" : "s"} without a call (${named(results)})`]),
  ])
}

/** A repaired session in words: what the log lacks and what each strategy did about it. */
export const repairSentence = (s: Replay.SessionResult): string =>
  `the log has ${repairText(s)}. ctxd left ${s.repairs.length === 1 ? "it" : "them"} out of its prompts; the full history and the sliding window send ${s.repairs.length === 1 ? "it" : "them"} as recorded (a provider would refuse those requests).`

/** The terms of the reports, as the table heads and the page name them (the table's columns, then the mechanisms). */
export const terms = (setup: Replay.Setup): Array<readonly [string, string]> => [
  ["full tok, ctxd tok", "input tokens summed over every turn: the whole history each time (no ctxd), and what ctxd sent."],
  ["fewer", "how many fewer input tokens ctxd sent than the full history."],
  [
    "cached",
    `the share of ctxd's input tokens read from the prompt cache (billed at ${setup.prices.cacheReadMultiplier}× the input price).`,
  ],
  ["full $, ctxd $", "effective cost at the model's prices: cache reads, cache writes, uncached input and output (the recorded replies)."],
  ["saved", "how much less ctxd cost than the full history (negative: more)."],
  [
    `sliding ${setup.settings.slidingMessages}`,
    `a second baseline: only the last ${setup.settings.slidingMessages} messages each turn (no masking, no compression).`,
  ],
  ["cache break", "a prompt that changed before its new messages: from there on it is billed as new input again."],
  ["mask, window", "masking sends old tool results as one-line references; the window leaves out the oldest messages."],
  [
    "min. cacheable",
    `prompts under ${int(setup.prices.minCacheableTokens)} tokens are never cached at ${setup.prices.family} prices, whatever the strategy.`,
  ],
]

/** The reasons as plain sentences, the most telling first (the terminal wraps them, the page escapes them). */
export const reasons = (run: Run, why: Why = explain(run), bill = true): Array<string> => {
  const { total, setup } = run
  const out: Array<string> = []
  const fewer = 1 - total.sentTokens / Math.max(1, total.fullTokens)
  const left = why.leftOut.reduce((n, [, t]) => n + t, 0)
  const byStage = why.leftOut.map(([stage, n]) => `${STAGE_LABELS[stage] ?? stage} ${int(n)} (${pct(n / Math.max(1, left))})`)
  const amount =
    Math.abs(fewer) < 0.0005 ? "about as many input tokens as" : `${pct(Math.abs(fewer))} ${fewer > 0 ? "fewer" : "more"} input tokens than`
  const stages = byStage.length === 0 ? "" : `; left out, by ctxd's own count: ${list(byStage)}`
  out.push(
    `ctxd sent ${amount} the full history (${int(total.sentTokens)} instead of ${int(total.fullTokens)} over ${int(total.turns)} turns)${stages}.`,
  )
  const { ctxd, full } = why.parts
  const parts = (
    [
      ["cache reads", full.reads, ctxd.reads],
      ["cache writes", full.writes, ctxd.writes],
      ["uncached input", full.uncached, ctxd.uncached],
    ] as const
  )
    .filter(([, f, c]) => f > 0 || c > 0)
    .sort(([, fa, ca], [, fb, cb]) => Math.abs(fb - cb) - Math.abs(fa - ca))
  if (bill)
    out.push(
      `The bill by part, full history → ctxd: ${parts.map(([name, f, c]) => `${name} ${usd(f)} → ${usd(c)}`).join(", ")}; output ${usd(ctxd.output)} for both (the recorded replies).`,
    )
  out.push(
    `${pct(total.cacheHitShare)} of ctxd's input tokens were read from the prompt cache, at ${setup.prices.cacheReadMultiplier}× the input price (full history: ${pct(why.fullCacheHit)}).`,
  )
  if (why.breaks.length > 0) {
    const n = why.breaks.reduce((k, [, c]) => k + c, 0)
    out.push(
      `${n} prompt${n === 1 ? "" : "s"} changed before ${n === 1 ? "its" : "their"} new messages (cache breaks: ${list(why.breaks.map(([r, c]) => `${c} ${BREAK_LABELS[r] ?? r}`))}): from the change on, the prompt is billed as new input again (a cache write, or uncached); the bill above includes that.`,
    )
  }
  if (why.deferred.length > 0)
    out.push(
      `ctxd held back ${list(why.deferred.map(([edit, n]) => `${edit === "mask" ? "masking" : edit === "window" ? "the window" : edit} on ${n} turn${n === 1 ? "" : "s"}`))}: rewriting the cached prompt would have cost more than it saved then.`,
    )
  if (why.uncacheable.ctxd > 0 || why.uncacheable.full > 0)
    out.push(
      `${why.uncacheable.ctxd} of ctxd's ${int(total.turns)} prompts (full history: ${why.uncacheable.full}) were under the minimum cacheable length (${int(why.uncacheable.min)} tokens at ${setup.prices.family} prices): such prompts are never cached, whatever the strategy.`,
    )
  out.push("Compaction (summaries of old messages) does not run in a replay: it needs a summarizer model.")
  if (total.fullOverWindow > 0)
    out.push(
      `${total.fullOverWindow} full-history prompts were over the prompt limit (${int(setup.model.effectiveWindow)} tokens): a provider would refuse them; they are billed as if it had not.`,
    )
  return out
}
