import { join } from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { COLORS } from "../src/cli/ReplayCharts.ts"
import * as ReplayExplain from "../src/cli/ReplayExplain.ts"
import type { Run } from "../src/cli/ReplayExplain.ts"
import * as ReplayHtml from "../src/cli/ReplayHtml.ts"
import { shortNames } from "../src/cli/ReplayNames.ts"
import * as ReplayOutput from "../src/cli/ReplayOutput.ts"
import { replay, SAMPLES, sessionsOf, unansweredCall, unansweredCallFile } from "./ReplayFixtures.ts"

const table = (run: Run) => ReplayOutput.table(run.setup, run.sessions, run.total)
const page = (...runs: Array<Run>) => ReplayHtml.page(runs)

/** The cells of the terminal table's `all sessions` row, by column head. */
const totalRow = (text: string): Record<string, string> => {
  const lines = text.split("\n")
  const head = lines.find((l) => l.startsWith("session "))!
  const heads = head.split(/ {2,}/)
  const cells = lines.find((l) => l.startsWith("all sessions"))!.split(/ {2,}/)
  return Object.fromEntries(heads.map((h, i) => [h, cells[i] ?? ""]))
}

// Each chart's series: the polyline's stroke and its legend entry's stroke and text colour.
const chartsOf = (html: string) =>
  [...html.matchAll(/<svg[\s\S]*?<\/svg>/g)].map(([svg]) => ({
    lines: [...svg.matchAll(/<polyline class="series" data-meaning="(\w+)"[^>]* stroke="([^"]+)"/g)].map(([, m, c]) => [m!, c!] as const),
    legend: [
      ...svg.matchAll(/<g class="legend" data-meaning="(\w+)"><line [^>]*stroke="([^"]+)"[^>]*\/><text [^>]*style="fill:([^"]+)"/g),
    ].map(([, m, stroke, fill]) => ({ meaning: m!, stroke: stroke!, fill: fill! })),
    marks: [...svg.matchAll(/<line [^>]*class="mark" stroke="([^"]+)"/g)].map(([, c]) => c!),
  }))

describe("the replay report on the bundled samples", { timeout: 120_000 }, () => {
  let swe: Run
  let tau: Run
  let repaired: Run
  beforeAll(async () => {
    swe = await replay("claude-sonnet-4-5", sessionsOf([join(SAMPLES, "swe-agent")]))
    tau = await replay("gpt-4o", sessionsOf([join(SAMPLES, "tau-bench-airline-gpt4o.json")]))
    repaired = await replay("claude-sonnet-4-5", sessionsOf([unansweredCallFile(), join(SAMPLES, "swe-agent", "ctf_pwn_warmup.traj")]))
  }, 120_000)

  it("the terminal table fits 120 columns, the longest SWE-agent names included, and keeps rows apart", () => {
    expect(Math.max(...swe.sessions.map((s) => s.id.length))).toBeGreaterThan(120)
    for (const run of [swe, tau, repaired]) {
      const text = table(run)
      for (const line of text.split("\n")) expect(line.length, line).toBeLessThanOrEqual(ReplayOutput.WIDTH)
      const lines = text.split("\n")
      const rule = lines.findIndex((l) => l.startsWith("-----"))
      const rows = lines.slice(rule + 1, rule + 1 + lines.slice(rule + 1).findIndex((l) => l.startsWith("-----")))
      expect(rows).toHaveLength(run.sessions.length)
      const names = rows.map((r) => r.split(/ {2,}/)[0])
      expect(new Set(names).size).toBe(names.length)
    }
  })

  it("shortened names stay apart and within their width, even for runs named alike", () => {
    const base = "replay__marshmallow-code__marshmallow-1867__"
    const tail = "__t-0.20__p-0.95__c-2.00__install-1_marshmallow-code__marshmallow-1867"
    const ids = ["xml_sys-env_window100", "default_sys-env_window100", "xml_sys-env_cursors_window100", "function_calling"].map(
      (c) => `${base}${c}${tail}`,
    )
    const short = shortNames([...ids, ids[0]!, "x".repeat(300), "short"], 30)
    for (const s of short) expect(s.length).toBeLessThanOrEqual(30)
    expect(new Set(short).size).toBe(short.length)
    expect(short.at(-1)).toBe("short")
    expect(short[0]).toContain("xml")
  })

  it("the terminal table and the page lead with the answer: with and without ctxd, as the totals say", () => {
    const text = table(tau)
    const answer = text.split("\n").find((l) => l.startsWith("ANSWER"))!
    expect(answer).toContain(`without ctxd (full history) ${ReplayExplain.usd(tau.total.usd.full)}`)
    expect(answer).toContain(`with ctxd ${ReplayExplain.usd(tau.total.usd.ctxd)}`)
    const html = page(tau)
    expect(html.indexOf('<section id="answer">')).toBeLessThan(html.indexOf("<svg"))
    expect(html.indexOf(`<b class="ctxd">${ReplayExplain.usd(tau.total.usd.ctxd)}</b>`)).toBeLessThan(html.indexOf("<svg"))
  })

  it("the answer section lists each model's cost with and without ctxd, equal to its table's totals", () => {
    const html = page(swe, tau)
    const answer = html.slice(html.indexOf('<section id="answer">'), html.indexOf('<section id="turns">'))
    for (const run of [swe, tau]) {
      const row = answer.match(new RegExp(`<tr data-model="${run.setup.model.name}">([\\s\\S]*?)</tr>`))![1]!
      const full = row.match(/<td class="full"[^>]*>([^<]+)</)![1]
      const ctxd = row.match(/<td class="ctxd"[^>]*>([^<]+)</)![1]
      const cells = totalRow(table(run))
      expect(full).toBe(cells["full $"])
      expect(ctxd).toBe(cells["ctxd $"])
      expect(full).toBe(ReplayExplain.usd(run.total.usd.full))
      expect(ctxd).toBe(ReplayExplain.usd(run.total.usd.ctxd))
      expect(answer).toContain(`Why (${run.setup.model.name})`)
    }
  })

  it("why: the bill's parts add up to each strategy's cost and the stages' savings are the turns' own", () => {
    for (const run of [swe, tau]) {
      const why = ReplayExplain.explain(run)
      const sum = (p: ReplayExplain.Parts) => p.reads + p.writes + p.uncached + p.output
      expect(sum(why.parts.ctxd)).toBeCloseTo(run.total.usd.ctxd, 9)
      expect(sum(why.parts.full)).toBeCloseTo(run.total.usd.full, 9)
      expect(why.parts.ctxd.output).toBeCloseTo(why.parts.full.output, 12)
      const mask = run.sessions.flatMap((s) => s.turns).reduce((n, t) => n + (t.leftOut["mask"] ?? 0), 0)
      expect(why.leftOut.find(([stage]) => stage === "mask")?.[1] ?? 0).toBe(mask)
    }
    // tau-bench: tool schemas compressed and old results masked, both named with their tokens
    const text = table(tau)
    expect(text).toMatch(/tool schema compression [\d,]+/)
    expect(text).toMatch(/masking of old tool results [\d,]+/)
  })

  it("each chart's legend is drawn in its line's colour, one colour per meaning, cache breaks apart", () => {
    const colors = Object.values(COLORS)
    expect(new Set(colors).size).toBe(colors.length)
    const charts = chartsOf(page(tau))
    expect(charts.length).toBeGreaterThan(3)
    let marked = 0
    for (const c of charts) {
      expect(c.legend.filter((l) => l.meaning !== "cacheBreak")).toHaveLength(c.lines.length)
      for (const [meaning, stroke] of c.lines) {
        expect(stroke).toBe(COLORS[meaning as keyof typeof COLORS])
        const entry = c.legend.find((l) => l.meaning === meaning)!
        expect(entry.stroke).toBe(stroke)
        expect(entry.fill).toBe(stroke)
      }
      expect(new Set(c.lines.map(([, s]) => s)).size).toBe(c.lines.length)
      for (const m of c.marks) expect(c.lines.map(([, s]) => s)).not.toContain(m)
      if (c.marks.length > 0) {
        marked++
        expect(c.legend.find((l) => l.meaning === "cacheBreak")?.stroke).toBe(COLORS.cacheBreak)
      }
    }
    expect(marked).toBeGreaterThan(0)
    // no style rule recolours every text of a chart (it would override the legend's colours)
    const style = page(tau).match(/<style>([\s\S]*?)<\/style>/)![1]!
    expect(style).not.toMatch(/(^|[}\s,])(svg\s+)?text\s*\{[^}]*fill/)
    expect(style).not.toContain("!important")
  })

  it("a log with an unanswered tool call is flagged as repaired: which session, what, in the table and the page", () => {
    const s = repaired.sessions.find((x) => x.id === "unanswered-call")!
    expect(s.repairs).toEqual([{ turn: 2, kind: "call without result", callId: "c2", tool: "weather" }])
    expect(repaired.sessions.find((x) => x.id !== "unanswered-call")!.repairs).toEqual([])
    // ctxd left the call out, the full history sent it as recorded
    expect(s.turns.every((t) => t.orphans === 0)).toBe(true)
    expect(s.turns.at(-1)!.fullOrphans).toBe(1)
    const text = table(repaired)
    const row = text.split("\n").find((l) => l.startsWith("unanswered-call "))!
    expect(row.trimEnd().endsWith(" R")).toBe(true)
    expect(text).toMatch(/REPAIRED unanswered-call: the log has 1 tool call without a result \(turn 2: call c2 to weather\)/)
    expect(
      text
        .split("\n")
        .find((l) => l.startsWith("ctf_pwn_warmup "))!
        .trimEnd(),
    ).not.toMatch(/ R$/)
    const html = page(repaired)
    const answer = html.slice(html.indexOf('<section id="answer">'), html.indexOf('<section id="turns">'))
    expect(answer).toMatch(
      /<b>Input repaired<\/b> in <span class="name" title="unanswered-call">unanswered-call<\/span>: the log has 1 tool call without a result \(turn 2: call c2 to weather\)/,
    )
    expect(html).toMatch(/<tr class="flagged"><td><span class="name" title="unanswered-call">/)
    expect(unansweredCall.messages).toHaveLength(7)
  })

  it("explains its terms and says it in plain English", () => {
    const text = table(tau)
    for (const term of ["fewer", "cached", "cache break", "mask, window", "min. cacheable", "flags"])
      expect(text).toMatch(new RegExp(`^  ${term.replace(/[.$]/g, "\\$&")} +\\S`, "m"))
    expect(text).toContain("prompts under 1,024 tokens are never cached")
    const html = page(tau)
    expect(html).toContain("<dt>cache break</dt>")
    expect(html).toMatch(
      /up to the change the cache could still be read[^<]*<\/p><ul><li>turn \d+: [^<]*, changed after its first [\d,]+ tokens<\/li>/,
    )
    for (const out of [text, html, table(swe)]) {
      expect(out).not.toMatch(/same than|more than the full history than/)
      expect(out).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)/)
    }
  })
})
