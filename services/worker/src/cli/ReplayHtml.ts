/**
 * `ctxd replay --html report.html`: one self-contained page (inline SVG and
 * CSS, no script, nothing fetched): the totals, the cumulative cost of each
 * strategy over all turns, and per session (the longest first, at most
 * {@link MAX_SESSIONS}) tokens per turn sent vs full history with the turns
 * where ctxd's prompt changed before its new messages (a cache break) marked
 * and named, and the cumulative cost of ctxd, full history and the sliding
 * window.
 */
import * as Replay from "./Replay.ts"

/** Sessions charted one by one (the rest are in the table). */
export const MAX_SESSIONS = 40

const W = 760
const H = 220
const PAD = { left: 70, right: 130, top: 14, bottom: 28 }

const escape = (s: string): string => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")
const num = (n: number): string => Math.round(n).toLocaleString("en")
const money = (n: number): string => `$${n < 10 ? n.toFixed(4) : n.toFixed(2)}`

interface Series {
  readonly name: string
  readonly color: string
  readonly values: ReadonlyArray<number>
}

/** A line chart of `series` over turns; `marks`: turn index → label (vertical markers). */
const chart = (
  title: string,
  unit: (n: number) => string,
  series: ReadonlyArray<Series>,
  marks: ReadonlyArray<readonly [number, string]> = [],
): string => {
  const n = Math.max(1, ...series.map((s) => s.values.length))
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values))
  const x = (i: number) => PAD.left + (n === 1 ? 0 : (i / (n - 1)) * (W - PAD.left - PAD.right))
  const y = (v: number) => PAD.top + (1 - v / max) * (H - PAD.top - PAD.bottom)
  const parts: Array<string> = []
  for (const f of [0, 0.5, 1]) {
    parts.push(`<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(max * f)}" y2="${y(max * f)}" class="grid"/>`)
    parts.push(`<text x="${PAD.left - 6}" y="${y(max * f) + 4}" text-anchor="end">${escape(unit(max * f))}</text>`)
  }
  parts.push(`<text x="${PAD.left}" y="${H - 8}">turn 1</text><text x="${W - PAD.right}" y="${H - 8}" text-anchor="end">turn ${n}</text>`)
  for (const [i, label] of marks) {
    parts.push(
      `<line x1="${x(i)}" x2="${x(i)}" y1="${PAD.top}" y2="${H - PAD.bottom}" class="mark"><title>turn ${i + 1}: cache break (${escape(label)})</title></line>`,
    )
  }
  series.forEach((s, k) => {
    const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ")
    parts.push(`<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="1.6"/>`)
    parts.push(`<text x="${W - PAD.right + 8}" y="${PAD.top + 14 + 16 * k}" fill="${s.color}">${escape(s.name)}</text>`)
  })
  return `<figure><figcaption>${escape(title)}</figcaption><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escape(title)}">${parts.join("")}</svg></figure>`
}

const cumulative = (values: ReadonlyArray<number>): Array<number> => {
  let acc = 0
  return values.map((v) => (acc += v))
}

const COLORS = { ctxd: "#1f77b4", full: "#d62728", sliding: "#ff7f0e" } as const

const costChart = (title: string, turns: ReadonlyArray<Replay.TurnResult>, slidingMessages: number): string =>
  chart(title, money, [
    { name: "full history", color: COLORS.full, values: cumulative(turns.map((t) => t.full.usd)) },
    { name: `sliding ${slidingMessages}`, color: COLORS.sliding, values: cumulative(turns.map((t) => t.sliding.usd)) },
    { name: "ctxd", color: COLORS.ctxd, values: cumulative(turns.map((t) => t.ctxd.usd)) },
  ])

const breaksOf = (turns: ReadonlyArray<Replay.TurnResult>): Array<readonly [number, string]> =>
  turns.flatMap((t, i) => (i > 0 && t.cacheReason !== "append" ? [[i, t.cacheReason] as const] : []))

const session = (s: Replay.SessionResult, slidingMessages: number): string => {
  const t = Replay.totals(s.turns)
  const breaks = breaksOf(s.turns)
  const list =
    breaks.length === 0
      ? "<p>No cache break: every prompt extended the previous one.</p>"
      : `<p>Cache breaks (the prompt changed before its new messages): ${breaks.map(([i, reason]) => `turn ${i + 1} <code>${escape(reason)}</code> at ${num(s.turns[i]!.changedAtTokens)} tok`).join("; ")}.</p>`
  return `<section><h2>${escape(s.id)} <small>${escape(s.source)}, ${t.turns} turns</small></h2>
<p>full history ${num(t.fullTokens)} tok, sent ${num(t.sentTokens)} tok; cache hit ${(100 * t.cacheHitShare).toFixed(1)} %; ctxd ${money(t.usd.ctxd)}, full ${money(t.usd.full)}, sliding ${money(t.usd.sliding)}; orphaned tool pairs ${t.orphans}${s.rejected === undefined ? "" : `; <b>rejected</b> ${escape(s.rejected)}`}</p>
${chart(
  "input tokens per turn: sent by ctxd vs the full history (red lines: cache breaks)",
  num,
  [
    { name: "full history", color: COLORS.full, values: s.turns.map((x) => x.full.tokens) },
    { name: "ctxd", color: COLORS.ctxd, values: s.turns.map((x) => x.ctxd.tokens) },
  ],
  breaks,
)}
${costChart("cumulative effective cost, USD", s.turns, slidingMessages)}
${list}</section>`
}

const STYLE = `body{font:14px system-ui,sans-serif;margin:24px;max-width:1000px;color:#222}
table{border-collapse:collapse}td,th{padding:3px 8px;text-align:right;border-bottom:1px solid #ddd}td:first-child,th:first-child{text-align:left}
svg text{font:11px system-ui,sans-serif;fill:#555}.grid{stroke:#eee}.mark{stroke:#d62728;stroke-opacity:.35;stroke-dasharray:3 2}
figure{margin:8px 0}figcaption{font-weight:600;margin-bottom:2px}small{color:#777;font-weight:400}section{margin-top:28px}`

/** The page. */
export const render = (setup: Replay.Setup, sessions: ReadonlyArray<Replay.SessionResult>, total: Replay.Totals): string => {
  const { model, format, settings } = setup
  const rows = sessions
    .map((s) => {
      const t = Replay.totals(s.turns)
      return `<tr><td>${escape(s.id)}</td><td>${t.turns}</td><td>${num(t.fullTokens)}</td><td>${num(t.sentTokens)}</td><td>${(100 * t.cacheHitShare).toFixed(1)} %</td><td>${money(t.usd.ctxd)}</td><td>${money(t.usd.full)}</td><td>${money(t.usd.sliding)}</td><td>${t.overWindow}</td><td>${t.orphans}</td></tr>`
    })
    .join("\n")
  const charted = [...sessions].sort((a, b) => b.turns.length - a.turns.length).slice(0, MAX_SESSIONS)
  const breaks = Object.entries(total.breaks)
    .map(([reason, n]) => `<code>${escape(reason)}</code> ${n}`)
    .join(", ")
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ctxd replay: ${escape(model.name)}</title><style>${STYLE}</style></head><body>
<h1>ctxd replay <small>${escape(model.name)}, ${escape(format)}, ${sessions.length} sessions, ${total.turns} turns</small></h1>
<p>Input tokens over every turn: full history ${num(total.fullTokens)}, sent by ctxd ${num(total.sentTokens)} (${(100 * (1 - total.sentTokens / Math.max(1, total.fullTokens))).toFixed(1)} % fewer).
Cache hit ${(100 * total.cacheHitShare).toFixed(1)} %. Effective cost: ctxd ${money(total.usd.ctxd)}, full history ${money(total.usd.full)}, sliding window of ${settings.slidingMessages} messages ${money(total.usd.sliding)}.
Prompts over the window: ${total.overWindow} (full history: ${total.fullOverWindow}). Orphaned tool pairs: ${total.orphans}.
Cache breaks: ${breaks === "" ? "none" : breaks}.</p>
${costChart(
  "cumulative effective cost over all turns, sessions one after another, USD",
  sessions.flatMap((s) => s.turns),
  settings.slidingMessages,
)}
<table><thead><tr><th>session</th><th>turns</th><th>full tok</th><th>sent tok</th><th>cache hit</th><th>ctxd $</th><th>full $</th><th>sliding $</th><th>over window</th><th>orphans</th></tr></thead><tbody>
${rows}
</tbody></table>
${charted.length < sessions.length ? `<p>Charts for the ${charted.length} longest sessions.</p>` : ""}
${charted.map((s) => session(s, settings.slidingMessages)).join("\n")}
<p><small>Calls ${settings.gapSeconds} s apart; cost by ctxd's cache simulator at ${escape(setup.prices.family)} prices; tokens counted with ${escape("tiktoken")}.</small></p>
</body></html>
`
}
