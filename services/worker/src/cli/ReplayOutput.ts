/**
 * A replay's results for people (the answer, a table per session and in
 * total, why, the terms; at most {@link WIDTH} columns) and for machines
 * (`--json`: settings, per-session totals with their turns, totals).
 */
import * as Replay from "./Replay.ts"
import * as ReplayExplain from "./ReplayExplain.ts"
import { int, usd, versus } from "./ReplayExplain.ts"
import { shortNames } from "./ReplayNames.ts"

/** No line of the text report is wider (a test holds it to that on the bundled samples). */
export const WIDTH = 120

/** Session names are cut to this many characters (whole in `--json` and the HTML report). */
const NAME_WIDTH = 34

const COLUMNS = ["session", "turns", "full tok", "ctxd tok", "fewer", "cached", "full $", "ctxd $", "saved", "flags"] as const

/** Flags, one letter each, in this order. */
const FLAGS = [
  ["R", "input repaired: the log has unpaired tool calls (below)", (s: Replay.SessionResult) => s.repairs.length > 0],
  ["W", "a ctxd prompt over the prompt limit", (s: Replay.SessionResult) => s.turns.some((t) => t.overWindow)],
  ["O", "unpaired tool calls in ctxd's prompts (a failure)", (s: Replay.SessionResult) => s.turns.some((t) => t.orphans > 0)],
  ["X", "rejected: the replay stopped at a turn (below)", (s: Replay.SessionResult) => s.rejected !== undefined],
] as const

const price = (n: number): string => (Number.isInteger(n) ? `$${n}` : `$${n.toFixed(2)}`)

const short = (n: number): string => `${(100 * n).toFixed(1)}%`

const row = (name: string, t: Replay.Totals, flags: string): Array<string> => [
  name,
  int(t.turns),
  int(t.fullTokens),
  int(t.sentTokens),
  short(1 - t.sentTokens / Math.max(1, t.fullTokens)),
  short(t.cacheHitShare),
  usd(t.usd.full),
  usd(t.usd.ctxd),
  short(1 - t.usd.ctxd / Math.max(1e-12, t.usd.full)),
  flags,
]

/** `text` in lines of at most `width` characters, each after `indent` (the first after `first`). */
export const wrap = (text: string, width: number, first = "", indent = first.replace(/./g, " ")): Array<string> => {
  const lines: Array<string> = []
  let line = first
  for (const word of text.split(/ +/)) {
    const lead = line === first || line === indent ? "" : " "
    if (line.length + lead.length + word.length > width && line.trim() !== "") {
      lines.push(line)
      line = indent + word
    } else line += lead + word
  }
  lines.push(line)
  return lines
}

/** The terms of the table, explained under it (the shared ones and the flags). */
const glossary = (setup: Replay.Setup): Array<readonly [string, string]> => [
  ...ReplayExplain.terms(setup),
  ["flags", FLAGS.map(([letter, meaning]) => `${letter} ${meaning}`).join("; ") + "."],
]

/** The text report: the answer, one row per session and the total, why, what the terms mean, and what failed; no line over {@link WIDTH}. */
export const table = (setup: Replay.Setup, sessions: ReadonlyArray<Replay.SessionResult>, total: Replay.Totals): string => {
  const names = shortNames(
    sessions.map((s) => s.id),
    NAME_WIDTH,
  )
  const flagsOf = (s: Replay.SessionResult) =>
    FLAGS.filter(([, , on]) => on(s))
      .map(([letter]) => letter)
      .join("")
  const rows = [...sessions.map((s, i) => row(names[i]!, Replay.totals(s.turns), flagsOf(s))), row("all sessions", total, "")]
  const widths = COLUMNS.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd()
  const rule = widths.map((w) => "-".repeat(w)).join("  ")
  const { model, format, prices, settings } = setup
  const run = { setup, sessions, total }
  const why = ReplayExplain.explain(run)
  const out = [
    `ctxd replay: ${model.name} (${format} format; window ${int(model.contextWindow)}, prompt limit ${int(model.effectiveWindow)} tokens;`,
    `  ${price(prices.inputPerMtok)} / ${price(prices.outputPerMtok)} per million tokens in / out), ${sessions.length} sessions, ${int(total.turns)} turns, calls ${settings.gapSeconds} s apart`,
    "",
    ...wrap(
      `without ctxd (full history) ${usd(total.usd.full)}, with ctxd ${usd(total.usd.ctxd)}: ${versus(total.usd.ctxd, total.usd.full)}` +
        ` (a sliding window of the last ${settings.slidingMessages} messages: ${usd(total.usd.sliding)}, ctxd ${versus(total.usd.ctxd, total.usd.sliding)}).`,
      WIDTH,
      "ANSWER  ",
    ),
    "",
    line(COLUMNS),
    rule,
    ...rows.slice(0, -1).map(line),
    rule,
    line(rows[rows.length - 1]!),
    "",
    "why:",
    ...ReplayExplain.reasons(run, why).flatMap((r) => wrap(r, WIDTH, "  - ", "    ")),
  ]
  if (names.some((n, i) => n !== sessions[i]!.id))
    out.push(
      ...wrap(
        "Long session names are shortened (…, words shared by similar names left out); --json and --html give them whole.",
        WIDTH,
        "  ",
      ),
    )
  out.push("", "terms:")
  const termWidth = Math.max(...glossary(setup).map(([term]) => term.length))
  for (const [term, meaning] of glossary(setup)) out.push(...wrap(meaning, WIDTH, `  ${term.padEnd(termWidth)}  `))
  for (const [i, s] of sessions.entries()) {
    if (s.repairs.length > 0) out.push(...wrap(`${names[i]}: ${ReplayExplain.repairSentence(s)}`, WIDTH, "REPAIRED "))
    if (s.rejected !== undefined) out.push(...wrap(`${names[i]}: ${s.rejected}`, WIDTH, "REJECTED "))
  }
  if (total.orphans > 0) out.push(`FAILED: ${total.orphans} unpaired tool calls/results in the prompts ctxd sent`)
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
        repairs: s.repairs,
        totals: totalsOf(s),
        turns: s.turns.map((t) => ({
          sentTokens: t.ctxd.tokens,
          fullTokens: t.full.tokens,
          slidingTokens: t.sliding.tokens,
          cacheReadTokens: t.ctxd.usage.cacheRead,
          usd: { ctxd: t.ctxd.usd, full: t.full.usd, sliding: t.sliding.usd },
          cacheReason: t.cacheReason,
          changedAtTokens: t.changedAtTokens,
          overWindow: t.overWindow,
          orphans: t.orphans,
          fullOrphans: t.fullOrphans,
          leftOut: t.leftOut,
          deferred: t.deferred,
        })),
      })),
      totals: total,
    },
    null,
    1,
  )
