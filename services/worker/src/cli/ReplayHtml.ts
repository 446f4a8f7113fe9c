/**
 * `ctxd replay --html FILE`: one self-contained page (inline SVG and CSS,
 * no script, nothing fetched) that leads with the answer — the cost with
 * ctxd and without it (the full history), per model replayed, and why
 * (`ReplayExplain`: the bill by part, the tokens each mechanism left out,
 * the cache breaks) — then the turn-by-turn picture (cumulative cost over
 * all turns; per session, the longest first, at most {@link MAX_SESSIONS}:
 * tokens per turn with the cache breaks marked, and cumulative cost), then
 * the per-session table and what the terms mean. A session whose log had to
 * be repaired is flagged in the answer and in the table.
 */
import * as Replay from "./Replay.ts"
import { chart, COLORS, cumulative, escape, type Series } from "./ReplayCharts.ts"
import * as ReplayExplain from "./ReplayExplain.ts"
import { int, pct, usd, versus } from "./ReplayExplain.ts"
import { shortNames } from "./ReplayNames.ts"

/** Sessions charted one by one (the rest are in the table). */
export const MAX_SESSIONS = 40

/** Long session names are shortened to this many characters (`ReplayNames`). */
const NAME_WIDTH = 40

/** Session charts open at first (the others under a click on their name). */
const OPEN_SESSIONS = 3

const costSeries = (turns: ReadonlyArray<Replay.TurnResult>, slidingMessages: number): Array<Series> => [
  { name: "full history", meaning: "full", values: cumulative(turns.map((t) => t.full.usd)) },
  { name: `sliding ${slidingMessages}`, meaning: "sliding", values: cumulative(turns.map((t) => t.sliding.usd)) },
  { name: "ctxd", meaning: "ctxd", values: cumulative(turns.map((t) => t.ctxd.usd)) },
]

const breaksOf = (turns: ReadonlyArray<Replay.TurnResult>): Array<readonly [number, string]> =>
  turns.flatMap((t, i) => (i > 0 && t.cacheReason !== "append" ? [[i, t.cacheReason] as const] : []))

const swatch = (meaning: keyof typeof COLORS): string => `<i class="swatch" style="background:${COLORS[meaning]}"></i>`

/** The names shown for session ids (long ones shortened, `ReplayNames`). */
type Names = ReadonlyMap<string, string>

/** A session's name: shortened (and cut by the page's width if need be), the whole name as its tooltip. */
const name = (id: string, names: Names): string => `<span class="name" title="${escape(id)}">${escape(names.get(id) ?? id)}</span>`

const breakText = (s: Replay.SessionResult, i: number, reason: string): string => {
  const at = s.turns[i]!.changedAtTokens
  return `turn ${i + 1}: ${escape(ReplayExplain.BREAK_LABELS[reason] ?? reason)}, changed after its first ${int(at)} tokens`
}

const sessionSection = (s: Replay.SessionResult, slidingMessages: number, open: boolean, names: Names): string => {
  const t = Replay.totals(s.turns)
  const breaks = breaksOf(s.turns)
  const list =
    breaks.length === 0
      ? "<p>No cache break: every prompt extended the previous one.</p>"
      : `<p>Cache breaks (the prompt changed before its new messages; up to the change the cache could still be read, the rest was billed as new input):</p><ul>${breaks.map(([i, r]) => `<li>${breakText(s, i, r)}</li>`).join("")}</ul>`
  const flags = [
    ...(s.repairs.length > 0 ? [`<p class="flag"><b>Input repaired:</b> ${escape(ReplayExplain.repairSentence(s))}</p>`] : []),
    ...(s.rejected !== undefined ? [`<p class="flag"><b>Rejected:</b> ${escape(s.rejected)}</p>`] : []),
  ].join("")
  return `<details${open ? " open" : ""}><summary>${name(s.id, names)} <small>${escape(s.source)}, ${t.turns} turns: full history ${usd(t.usd.full)}, ctxd ${usd(t.usd.ctxd)} (${versus(t.usd.ctxd, t.usd.full)})${s.repairs.length > 0 ? ", input repaired" : ""}</small></summary>
${flags}<p>Input tokens: full history ${int(t.fullTokens)}, ctxd ${int(t.sentTokens)}; ${pct(t.cacheHitShare)} of ctxd's read from the cache.</p>
${chart(
  "Input tokens per turn",
  int,
  [
    { name: "full history", meaning: "full", values: s.turns.map((x) => x.full.tokens) },
    { name: "ctxd", meaning: "ctxd", values: s.turns.map((x) => x.ctxd.tokens) },
  ],
  breaks,
)}
${chart("Cumulative cost, USD", usd, costSeries(s.turns, slidingMessages))}
${list}</details>`
}

/** One row of the answer table: the model, its with / without costs (as the terminal table's total row prints them). */
const answerRow = (run: ReplayExplain.Run, max: number): string => {
  const { total, setup } = run
  const bar = (v: number, meaning: keyof typeof COLORS) =>
    `<div class="bar" style="width:${((100 * v) / max).toFixed(1)}%;background:${COLORS[meaning]}"></div>`
  return `<tr data-model="${escape(setup.model.name)}"><td>${escape(setup.model.name)}</td><td>${run.sessions.length}</td><td>${int(total.turns)}</td>
<td class="full" data-usd="${total.usd.full}">${usd(total.usd.full)}</td><td class="ctxd" data-usd="${total.usd.ctxd}">${usd(total.usd.ctxd)}</td>
<td class="verdict">${versus(total.usd.ctxd, total.usd.full)}</td><td class="bars">${bar(total.usd.full, "full")}${bar(total.usd.ctxd, "ctxd")}</td>
<td class="sliding">${usd(total.usd.sliding)}</td></tr>`
}

const partsTable = (why: ReplayExplain.Why): string => {
  const { full, ctxd } = why.parts
  const rows = (
    [
      ["cache reads", full.reads, ctxd.reads],
      ["cache writes", full.writes, ctxd.writes],
      ["uncached input", full.uncached, ctxd.uncached],
      ["output (the recorded replies)", full.output, ctxd.output],
    ] as const
  )
    .map(
      ([part, f, c]) =>
        `<tr><td>${part}</td><td>${usd(f)}</td><td>${usd(c)}</td><td>${Math.abs(c - f) < 5e-5 ? "same" : `${c < f ? "−" : "+"}${usd(Math.abs(c - f))}`}</td></tr>`,
    )
    .join("")
  return `<table class="parts"><thead><tr><th>the bill by part</th><th>${swatch("full")}full history</th><th>${swatch("ctxd")}ctxd</th><th>ctxd − full</th></tr></thead><tbody>${rows}</tbody></table>`
}

const leftOutBars = (why: ReplayExplain.Why): string => {
  if (why.leftOut.length === 0) return ""
  const max = Math.max(...why.leftOut.map(([, n]) => n))
  return `<table class="leftout"><thead><tr><th><abbr title="by ctxd's own count per turn, summed over all turns">tokens left out, by mechanism</abbr></th><th></th><th></th></tr></thead><tbody>${why.leftOut
    .map(
      ([stage, n]) =>
        `<tr><td>${escape(ReplayExplain.STAGE_LABELS[stage] ?? stage)}</td><td>${int(n)}</td><td class="bars"><div class="bar" style="width:${((100 * n) / max).toFixed(1)}%;background:${COLORS.ctxd}"></div></td></tr>`,
    )
    .join("")}</tbody></table>`
}

const flagsOf = (run: ReplayExplain.Run, names: Names): string =>
  [
    ...run.sessions
      .filter((s) => s.repairs.length > 0)
      .map((s) => `<p class="flag"><b>Input repaired</b> in ${name(s.id, names)}: ${escape(ReplayExplain.repairSentence(s))}</p>`),
    ...run.sessions
      .filter((s) => s.rejected !== undefined)
      .map((s) => `<p class="flag"><b>Rejected</b> ${name(s.id, names)}: ${escape(s.rejected!)}</p>`),
    ...(run.total.orphans > 0
      ? [`<p class="flag"><b>Failed:</b> ${run.total.orphans} unpaired tool calls/results in the prompts ctxd sent.</p>`]
      : []),
  ].join("\n")

const why = (run: ReplayExplain.Run, titled: boolean, names: Names): string => {
  const w = ReplayExplain.explain(run)
  return `<h2>Why${titled ? ` (${escape(run.setup.model.name)})` : ""}</h2>
${flagsOf(run, names)}
<div class="cols">${partsTable(w)}${leftOutBars(w)}</div>
<ul class="why">${ReplayExplain.reasons(run, w, false)
    .map((r) => `<li>${escape(r)}</li>`)
    .join("")}</ul>`
}

/** A session's (or the total's) flags in words, each with what it means as its tooltip. */
const sessionFlags = (t: Replay.Totals, s?: Replay.SessionResult): Array<string> => [
  ...(s !== undefined && s.repairs.length > 0 ? [`<abbr title="${escape(ReplayExplain.repairSentence(s))}">input repaired</abbr>`] : []),
  ...(t.overWindow > 0 ? [`<abbr title="ctxd's prompts over the model's prompt limit">${t.overWindow} over limit</abbr>`] : []),
  ...(t.fullOverWindow > 0
    ? [
        `<abbr title="full-history prompts over the model's prompt limit (a provider would refuse them)">full: ${t.fullOverWindow} over limit</abbr>`,
      ]
    : []),
  ...(t.orphans > 0 ? [`<abbr title="unpaired tool calls/results in ctxd's prompts: a failure">${t.orphans} unpaired</abbr>`] : []),
  ...(s?.rejected !== undefined ? [`<abbr title="${escape(s.rejected)}">rejected</abbr>`] : []),
]

const sessionRow = (s: Replay.SessionResult, names: Names): string => {
  const t = Replay.totals(s.turns)
  const flags = sessionFlags(t, s)
  return `<tr${flags.length === 0 ? "" : ` class="flagged"`}><td>${name(s.id, names)}</td><td>${t.turns}</td><td>${int(t.fullTokens)}</td><td>${int(t.sentTokens)}</td><td>${pct(t.cacheHitShare)}</td><td>${usd(t.usd.full)}</td><td>${usd(t.usd.ctxd)}</td><td>${usd(t.usd.sliding)}</td><td class="flags">${flags.join(", ")}</td></tr>`
}

const head = (label: string, title: string): string => `<th><abbr title="${escape(title)}">${escape(label)}</abbr></th>`

const details = (run: ReplayExplain.Run, titled: boolean, names: Names): string => {
  const { setup, sessions, total } = run
  const n = setup.settings.slidingMessages
  const charted = [...sessions].sort((a, b) => b.turns.length - a.turns.length).slice(0, MAX_SESSIONS)
  return `<h2>Turn by turn${titled ? ` (${escape(setup.model.name)})` : ""}</h2>
${chart(
  "Cumulative cost over all turns (sessions one after another), USD",
  usd,
  costSeries(
    sessions.flatMap((s) => s.turns),
    n,
  ),
)}
${charted.length < sessions.length ? `<p>Charts for the ${charted.length} longest sessions (all are in the table below).</p>` : ""}
${charted.map((s, i) => sessionSection(s, n, i < OPEN_SESSIONS, names)).join("\n")}
<h2>Sessions${titled ? ` (${escape(setup.model.name)})` : ""}</h2>
<div class="wide"><table class="sessions"><thead><tr><th>session</th>${head("turns", "model calls replayed")}${head("full tok", "input tokens over every turn, sending the whole history")}${head("ctxd tok", "input tokens over every turn, as ctxd sent them")}${head("cached", "share of ctxd's input tokens read from the prompt cache")}${head("full $", "effective cost of the full history")}${head("ctxd $", "effective cost with ctxd")}${head(`sliding ${n} $`, `effective cost of a sliding window of the last ${n} messages`)}${head("flags", "input repaired, prompts over the limit, unpaired tool calls in ctxd's prompts, a rejected turn")}</tr></thead><tbody>
${sessions.map((s) => sessionRow(s, names)).join("\n")}
</tbody><tfoot><tr><td>all sessions</td><td>${total.turns}</td><td>${int(total.fullTokens)}</td><td>${int(total.sentTokens)}</td><td>${pct(total.cacheHitShare)}</td><td>${usd(total.usd.full)}</td><td>${usd(total.usd.ctxd)}</td><td>${usd(total.usd.sliding)}</td><td class="flags">${sessionFlags(total).join(", ")}</td></tr></tfoot></table></div>`
}

const STYLE = `body{font:15px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1040px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}small{color:#666;font-weight:400}
.lead{font-size:19px;margin:10px 0 14px}.lead b.full{color:${COLORS.full}}.lead b.ctxd{color:${COLORS.ctxd}}
table{border-collapse:collapse;margin:6px 0 12px}td,th{padding:3px 8px;text-align:right;border-bottom:1px solid #e4e4e4;vertical-align:top}
td:first-child,th:first-child{text-align:left}th{font-weight:600;white-space:nowrap}abbr{text-decoration:underline dotted;cursor:help}
table.answer td.full{color:${COLORS.full};font-weight:600}table.answer td.ctxd{color:${COLORS.ctxd};font-weight:600}table.answer td.verdict{font-weight:600}
td.bars{width:180px;text-align:left}.bar{height:7px;margin:3px 0;border-radius:2px}.leftout td.bars{width:160px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.name{display:inline-block;max-width:30em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom}
table.sessions{font-size:13px}table.sessions .name{max-width:25em}.wide{overflow-x:auto}table.answer td:first-child{white-space:nowrap}table.sessions tfoot td{font-weight:600;border-top:2px solid #ccc}
tr.flagged td{background:#fff4e5}table.sessions .flags{text-align:left}table.sessions td,table.sessions th{padding:3px 6px}.flag{background:#fff4e5;border-left:4px solid #e69f00;padding:6px 10px;margin:8px 0}
.why li{margin:3px 0}table.parts td:first-child{white-space:nowrap}.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(360px,max-content));gap:0 32px;align-items:start}
details{margin:10px 0;border-top:1px solid #eee;padding-top:6px}summary{cursor:pointer;font-weight:600}summary .name{max-width:36em}
svg{max-width:100%;height:auto}svg .axis{font:11px system-ui,sans-serif;fill:#555}svg .legend text{font:12px system-ui,sans-serif;font-weight:600}
.grid{stroke:#eee}figure{margin:8px 0}figcaption{font-weight:600;margin-bottom:2px;font-size:14px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px}dt{font-weight:600}dd{margin:0}`

/** The answer in one sentence: ctxd's cost and the full history's, per model. */
const lead = (runs: ReadonlyArray<ReplayExplain.Run>): string => {
  const { total, sessions } = runs[0]!
  const cost = (r: ReplayExplain.Run) =>
    `<b class="ctxd">${usd(r.total.usd.ctxd)}</b> instead of <b class="full">${usd(r.total.usd.full)}</b>`
  const verdict = (r: ReplayExplain.Run) => `<b>${versus(r.total.usd.ctxd, r.total.usd.full)}</b>`
  const start = `With ctxd these ${sessions.length} sessions (${int(total.turns)} model calls) would have cost`
  if (runs.length === 1)
    return `<p class="lead">${start} ${cost(runs[0]!)} with the full history, for ${escape(runs[0]!.setup.model.name)}: ${verdict(runs[0]!)}.</p>`
  const each = runs.map((r) => `${cost(r)} for ${escape(r.setup.model.name)} (${verdict(r)})`)
  return `<p class="lead">${start}, against sending the full history every turn, ${each.slice(0, -1).join(", ")} and ${each[each.length - 1]!}.</p>`
}

/** The page for one replay per model (the command line gives one). */
export const page = (runs: ReadonlyArray<ReplayExplain.Run>): string => {
  const titled = runs.length > 1
  const first = runs[0]!.setup
  const ids = [...new Set(runs.flatMap((r) => r.sessions.map((s) => s.id)))]
  const short = shortNames(ids, NAME_WIDTH)
  const names: Names = new Map(ids.map((id, i) => [id, short[i]!]))
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>ctxd replay: ${escape(runs.map((r) => r.setup.model.name).join(", "))}</title><style>${STYLE}</style></head><body>
<h1>ctxd replay <small>recorded agent sessions, re-run through ctxd and billed by its cache simulator</small></h1>
<section id="answer">
${lead(runs)}
<table class="answer"><thead><tr><th>model</th><th>sessions</th><th>turns</th><th>${swatch("full")}without ctxd (full history)</th><th>${swatch("ctxd")}with ctxd</th><th>ctxd vs full history</th><th></th><th>${swatch("sliding")}<abbr title="the last ${first.settings.slidingMessages} messages each turn, for reference">sliding ${first.settings.slidingMessages}</abbr></th></tr></thead><tbody>
${runs.map((r) => answerRow(r, Math.max(1e-12, ...runs.flatMap((x) => [x.total.usd.full, x.total.usd.ctxd])))).join("\n")}
</tbody></table>
${runs.map((r) => why(r, titled, names)).join("\n")}
</section>
<section id="turns">
${runs.map((r) => details(r, titled, names)).join("\n")}
</section>
<section id="terms"><h2>Terms</h2><dl>
${ReplayExplain.terms(first)
  .map(([term, meaning]) => `<dt>${escape(term)}</dt><dd>${escape(meaning)}</dd>`)
  .join("\n")}
<dt>input repaired</dt><dd>the recorded log has a tool call without its result (or a result without its call): ctxd leaves it out, the baselines send it as recorded.</dd>
</dl>
<p><small>Model calls ${first.settings.gapSeconds} s apart; costs by ctxd's cache simulator at ${escape(runs.map((r) => r.setup.prices.family).join(", "))} prices; tokens counted with tiktoken.</small></p></section>
</body></html>
`
}

/** The page of one replay (`ctxd replay --html`). */
export const render = (setup: Replay.Setup, sessions: ReadonlyArray<Replay.SessionResult>, total: Replay.Totals): string =>
  page([{ setup, sessions, total }])
