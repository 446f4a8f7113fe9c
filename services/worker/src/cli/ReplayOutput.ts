/**
 * A replay's results for people (a table per session and in total) and for
 * machines (`--json`: settings, per-session totals with their turns, totals).
 */
import * as Replay from "./Replay.ts"

const usd = (n: number): string => `$${n < 10 ? n.toFixed(4) : n.toFixed(2)}`
const pct = (n: number): string => `${(100 * n).toFixed(1)} %`
const int = (n: number): string => Math.round(n).toLocaleString("en")

const COLUMNS = [
  "session",
  "turns",
  "full tok",
  "sent tok",
  "saved",
  "cache hit",
  "ctxd $",
  "full $",
  "sliding-40 $",
  "over window",
  "orphans",
] as const

/** Session ids over this many characters are shortened in the table when they stay distinct (in full in `--json` and the HTML report). */
const ID_WIDTH = 80
const shortId = (id: string): string => (id.length <= ID_WIDTH ? id : `${id.slice(0, 60)}…${id.slice(id.length - (ID_WIDTH - 61))}`)

const row = (id: string, t: Replay.Totals): Array<string> => [
  id,
  int(t.turns),
  int(t.fullTokens),
  int(t.sentTokens),
  pct(1 - t.sentTokens / Math.max(1, t.fullTokens)),
  pct(t.cacheHitShare),
  usd(t.usd.ctxd),
  usd(t.usd.full),
  usd(t.usd.sliding),
  `${t.overWindow} / ${t.fullOverWindow}`,
  String(t.orphans),
]

const versus = (ours: number, theirs: number): string => {
  const change = ours / Math.max(1e-12, theirs) - 1
  return Math.abs(change) < 0.0005 ? "the same" : `${pct(Math.abs(change))} ${change < 0 ? "less" : "more"}`
}

/** The text report: settings, one row per session, a total row, the cache breaks by reason, and what failed. */
export const table = (setup: Replay.Setup, sessions: ReadonlyArray<Replay.SessionResult>, total: Replay.Totals): string => {
  // ids shortened when that keeps them apart
  const short = sessions.map((s) => shortId(s.id))
  const ids = new Set(short).size === short.length ? short : sessions.map((s) => s.id)
  const rows = [...sessions.map((s, i) => row(ids[i]!, totalsOf(s))), row("all sessions", total)]
  const widths = COLUMNS.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  const rule = widths.map((w) => "-".repeat(w)).join("  ")
  const { model, format, prices, settings } = setup
  const out = [
    `${model.name} (${format}; window ${int(model.contextWindow)}, prompt limit ${int(model.effectiveWindow)} tokens; $${prices.inputPerMtok} / $${prices.outputPerMtok} per Mtok in / out), calls ${settings.gapSeconds} s apart`,
    "",
    line(COLUMNS),
    rule,
    ...rows.slice(0, -1).map(line),
    rule,
    line(rows[rows.length - 1]!),
    "",
    `full tok / sent tok: input tokens summed over every turn, sending the whole history vs what ctxd sent.`,
    `cache hit: share of ctxd's input tokens read from the prompt cache. $: effective cost (cache reads, writes, uncached input, output)`,
    `  of ctxd, of the full history and of a ${settings.slidingMessages}-message sliding window. over window: ctxd's prompts / full-history prompts over the limit.`,
  ]
  const breaks = Object.entries(total.breaks).sort(([, a], [, b]) => b - a)
  out.push(
    breaks.length === 0
      ? "cache breaks: none (every prompt extended the previous one)"
      : `cache breaks (prompt changed before its new messages): ${breaks.map(([reason, n]) => `${reason} ${n}`).join(", ")}`,
  )
  out.push(
    `ctxd's cost: ${versus(total.usd.ctxd, total.usd.full)} than the full history, ${versus(total.usd.ctxd, total.usd.sliding)} than the sliding window`,
  )
  for (const s of sessions) if (s.rejected !== undefined) out.push(`REJECTED ${s.id}: ${s.rejected}`)
  if (total.orphans > 0) out.push(`FAILED: ${total.orphans} orphaned tool calls/results in the prompts ctxd sent`)
  return out.join("\n")
}

const totalsOf = (s: Replay.SessionResult): Replay.Totals => Replay.totals(s.turns)

/** The JSON report (`--json`). */
export const json = (setup: Replay.Setup, sessions: ReadonlyArray<Replay.SessionResult>, total: Replay.Totals): string =>
  JSON.stringify(
    {
      model: setup.model,
      format: setup.format,
      prices: { family: setup.prices.family, inputPerMtok: setup.prices.inputPerMtok, outputPerMtok: setup.prices.outputPerMtok },
      gapSeconds: setup.settings.gapSeconds,
      slidingMessages: setup.settings.slidingMessages,
      options: setup.settings.options,
      sessions: sessions.map((s) => ({
        id: s.id,
        source: s.source,
        ...(s.rejected === undefined ? {} : { rejected: s.rejected }),
        totals: totalsOf(s),
        turns: s.turns.map((t) => ({
          sentTokens: t.ctxd.tokens,
          fullTokens: t.full.tokens,
          slidingTokens: t.sliding.tokens,
          cacheReadTokens: t.ctxd.usage.cacheRead,
          usd: { ctxd: t.ctxd.usd, full: t.full.usd, sliding: t.sliding.usd },
          cacheReason: t.cacheReason,
          overWindow: t.overWindow,
          orphans: t.orphans,
        })),
      })),
      totals: total,
    },
    null,
    1,
  )
