/**
 * The SVG line charts of the replay's HTML report: one colour per meaning
 * ({@link COLORS}, used by the lines, their legend and the page's text
 * alike), the legend drawn with each line's own stroke and dash, cache
 * breaks as dotted vertical markers of their own colour. Inline SVG only.
 */

/** One colour per meaning; no two alike. */
export const COLORS = {
  /** The full history (no ctxd): vermillion. */
  full: "#d55e00",
  /** The sliding-window baseline: amber, dashed. */
  sliding: "#e69f00",
  /** ctxd: blue. */
  ctxd: "#0072b2",
  /** A cache break marker: purple, dotted. */
  cacheBreak: "#7b3294",
} as const

/** Dash patterns (a second cue besides the colour). */
export const DASHES = { full: "", sliding: "6 3", ctxd: "", cacheBreak: "2 3" } as const

export type Meaning = keyof typeof COLORS

export interface Series {
  readonly name: string
  readonly meaning: Meaning
  readonly values: ReadonlyArray<number>
}

const W = 760
const H = 230
const PAD = { left: 70, right: 16, top: 30, bottom: 28 }

export const escape = (s: string): string => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** A legend entry: a short stroke in the series' colour and dash, then its name in the same colour. */
const legendItem = (x: number, name: string, meaning: Meaning, vertical = false): string => {
  const dash = DASHES[meaning] === "" ? "" : ` stroke-dasharray="${DASHES[meaning]}"`
  const stroke = vertical
    ? `<line x1="${x + 9}" x2="${x + 9}" y1="${PAD.top - 26}" y2="${PAD.top - 10}" stroke="${COLORS[meaning]}" stroke-width="2"${dash}/>`
    : `<line x1="${x}" x2="${x + 18}" y1="${PAD.top - 18}" y2="${PAD.top - 18}" stroke="${COLORS[meaning]}" stroke-width="2.5"${dash}/>`
  return `<g class="legend" data-meaning="${meaning}">${stroke}<text x="${x + 23}" y="${PAD.top - 14}" style="fill:${COLORS[meaning]}">${escape(name)}</text></g>`
}

/**
 * A line chart of `series` over turns, with its legend on top; `marks`:
 * turn index → a label (a cache break: a dotted vertical line with a tooltip).
 */
export const chart = (
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
    parts.push(`<text class="axis" x="${PAD.left - 6}" y="${y(max * f) + 4}" text-anchor="end">${escape(unit(max * f))}</text>`)
  }
  parts.push(
    `<text class="axis" x="${PAD.left}" y="${H - 8}">turn 1</text><text class="axis" x="${W - PAD.right}" y="${H - 8}" text-anchor="end">turn ${n}</text>`,
  )
  for (const [i, label] of marks) {
    parts.push(
      `<line x1="${x(i)}" x2="${x(i)}" y1="${PAD.top}" y2="${H - PAD.bottom}" class="mark" stroke="${COLORS.cacheBreak}" stroke-dasharray="${DASHES.cacheBreak}"><title>turn ${i + 1}: cache break (${escape(label)})</title></line>`,
    )
  }
  let legendX = PAD.left
  for (const [k, s] of series.entries()) {
    // a line hidden under a later one (values within 0.2 % of the chart's height) says so in the legend
    const close = (a: number, b: number) => Math.abs(a - b) <= max * 0.002
    const under = series
      .slice(k + 1)
      .findLast((o) => o.values.length === s.values.length && o.values.every((v, i) => close(v, s.values[i]!)))
    const label = under === undefined ? s.name : `${s.name} (same as ${under.name})`
    const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ")
    const dash = DASHES[s.meaning] === "" ? "" : ` stroke-dasharray="${DASHES[s.meaning]}"`
    parts.push(
      `<polyline class="series" data-meaning="${s.meaning}" points="${points}" fill="none" stroke="${COLORS[s.meaning]}" stroke-width="${s.meaning === "ctxd" ? 2.2 : 1.6}"${dash}/>`,
    )
    parts.push(legendItem(legendX, label, s.meaning))
    legendX += 40 + 7 * label.length
  }
  if (marks.length > 0) parts.push(legendItem(legendX, "cache break", "cacheBreak", true))
  return `<figure><figcaption>${escape(title)}</figcaption><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escape(title)}">${parts.join("")}</svg></figure>`
}

export const cumulative = (values: ReadonlyArray<number>): Array<number> => {
  let acc = 0
  return values.map((v) => (acc += v))
}
