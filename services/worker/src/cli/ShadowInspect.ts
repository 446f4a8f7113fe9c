/**
 * `ctxd inspect --shadow FILE [<tenant> [<session>]] [--json]`: the shadow
 * records a gateway appended (`ctxd gateway --shadow-file`), summed per
 * tenant and per session: requests, the input cost with caching of the
 * client's bodies and of ctxd's, the projected saving. Records of several
 * gateways may be concatenated into one file. A line that is no record is
 * skipped and counted.
 */
import { Shadow } from "@ctxd/gateway"
import { readFileSync } from "node:fs"

export interface Input {
  readonly file: string
  readonly tenant?: string | undefined
  readonly session?: string | undefined
  readonly json: boolean
}

const isRecord = (value: unknown): value is Shadow.Record =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as Shadow.Record).tenant === "string" &&
  typeof (value as Shadow.Record).session === "string" &&
  typeof (value as Shadow.Record).client?.usd === "number" &&
  typeof (value as Shadow.Record).ctxd?.usd === "number"

/** The records of `text` (one JSON object a line) and how many lines were not records. */
export const parse = (text: string): { readonly records: Array<Shadow.Record>; readonly skipped: number } => {
  const records: Array<Shadow.Record> = []
  let skipped = 0
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    try {
      const value: unknown = JSON.parse(line)
      if (isRecord(value)) records.push(value)
      else skipped++
    } catch {
      skipped++
    }
  }
  return { records, skipped }
}

const usd = (n: number): string => `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 6 : 4)}`
const pct = (saved: number, client: number): string => (client > 0 ? `${((100 * saved) / client).toFixed(1)}%` : "-")

const line = (name: string, t: Shadow.Totals): string =>
  `${name.padEnd(40)} ${String(t.requests).padStart(8)} ${usd(t.clientUsd).padStart(12)} ${usd(t.ctxdUsd).padStart(12)} ${usd(t.savedUsd).padStart(12)} ${pct(t.savedUsd, t.clientUsd).padStart(7)}`

/** Prints the summary; exit 1 when the file cannot be read or nothing matches. */
export const run = (input: Input, out: (text: string) => void = (t) => process.stdout.write(t)): number => {
  let text: string
  try {
    text = readFileSync(input.file, "utf8")
  } catch (e) {
    process.stderr.write(`cannot read ${input.file} (${(e as NodeJS.ErrnoException).code ?? "error"})\n`)
    return 1
  }
  const { records, skipped } = parse(text)
  const picked = records.filter(
    (r) => (input.tenant === undefined || r.tenant === input.tenant) && (input.session === undefined || r.session === input.session),
  )
  if (picked.length === 0) {
    process.stderr.write(
      `no shadow records${input.tenant === undefined ? "" : ` of ${input.tenant}${input.session === undefined ? "" : `/${input.session}`}`} in ${input.file}\n`,
    )
    return 1
  }
  const { sessions, tenants } = Shadow.summarize(picked)
  if (input.json) {
    out(`${JSON.stringify({ tenants: Object.fromEntries(tenants), sessions: Object.fromEntries(sessions), skipped }, null, 1)}\n`)
    return 0
  }
  const head = `${"".padEnd(40)} ${"requests".padStart(8)} ${"client".padStart(12)} ${"ctxd".padStart(12)} ${"saved".padStart(12)} ${"saved%".padStart(7)}`
  const rows = [
    "input cost with prompt caching, per tenant and session (what each body would cost; output is the same either way)",
    head,
    ...[...tenants].map(([tenant, t]) => line(`tenant ${tenant}`, t)),
    ...[...sessions].map(([session, t]) => line(`  ${session}`, t)),
    ...(skipped > 0 ? [`(${skipped} lines that are no shadow record skipped)`] : []),
  ]
  out(`${rows.join("\n")}\n`)
  return 0
}
