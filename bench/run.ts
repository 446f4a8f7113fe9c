// `npm run bench`: runs every benchmark, prints one table and writes the rows
// as JSON to bench/results/<name>.json (default `latest`).
//   npm run bench                 all benchmarks
//   npm run bench -- assembly     only those whose name contains "assembly"
//   npm run bench -- economics --model gpt-4o   (economics: the model to price; default claude-sonnet-5-5;
//                                                --cache-edits expected: without the savings ledger;
//                                                --models a,b,c: several, with a summary per model)
//   npm run bench -- toolsearch --model claude-opus-5-5   (load_toolset vs tool search, GitHub catalog; default claude-opus-5-5)
//   npm run bench -- memory --memory-docs 10000,1000000   (memory: documents per run; default 10000)
//   npm run bench -- scaleout --messages 1000000   (the store at scale; also --turns, --session-length, --rate, --seconds)
//   npm run bench -- assembly --format all      (assembly, e2e: the request formats, one or `all`;
//                                                default assembly Anthropic + OpenAI, e2e OpenAI)
//   npm run bench -- e2e --profile              (e2e: the worker under --cpu-prof; its self time by group)
//   npm run bench -- e2e --turns 120            (e2e: closed-loop turns per session, default 20; more: steadier ratios)
//   npm run bench -- e2e --rounds 7            (e2e: closed-loop rounds, default 5; each ratio is per round, then the median)
//   npm run bench -- e2e --warmup 2            (e2e: unmeasured closed-loop rounds of each load first, default 1)
//   BENCH_WORKER_ROOT=../other npm run bench -- e2e  (e2e: the worker of another checkout, for A/B runs)
//   npm run bench -- e2e --refs                 (e2e: system and tools named by ref, as ContextClient sends them)
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Assembly from "./Assembly.ts"
import * as Burst from "./Burst.ts"
import * as Compaction from "./Compaction.ts"
import * as Decode from "./Decode.ts"
import * as Economics from "./economics/Economics.ts"
import * as ToolSearch from "./economics/ToolSearch.ts"
import * as EndToEnd from "./EndToEnd.ts"
import * as LoopDetector from "./LoopDetector.ts"
import * as Memory from "./Memory.ts"
import * as Optimizations from "./Optimizations.ts"
import * as ScaleOut from "./ScaleOut.ts"
import * as Scaling from "./Scaling.ts"
import * as Storage from "./Storage.ts"
import * as Store from "./Store.ts"
import * as TokenCounter from "./TokenCounter.ts"
import * as Workspace from "./Workspace.ts"
import type { Row } from "./Stats.ts"

const benches: ReadonlyArray<readonly [string, () => Promise<Row[]>]> = [
  ["assembly", Assembly.run],
  ["optimizations", Optimizations.run],
  ["economics", Economics.run],
  ["toolsearch", ToolSearch.run],
  ["tokens", TokenCounter.run],
  ["compaction", Compaction.run],
  ["loop", () => Promise.resolve([...LoopDetector.run()])],
  ["store", Store.run],
  ["memory", Memory.run],
  ["storage", Storage.run],
  ["decode", () => Decode.run()],
  ["e2e", () => EndToEnd.runFormats()],
  ["scaling", () => Scaling.run()],
  ["burst", () => Burst.run()],
  ["workspace", () => Workspace.run()],
  ["scaleout", () => ScaleOut.run()],
]

// the first argument filters by name, unless it is an option
const filter = process.argv[2]?.startsWith("--") === false ? process.argv[2] : undefined
const rows: Row[] = []
for (const [name, run] of benches) {
  if (filter !== undefined && !name.includes(filter)) continue
  console.log(`running ${name} ...`)
  rows.push(...(await run()))
}

const width = (key: (r: Row) => string) => Math.max(...rows.map((r) => key(r).length))
const cols: ReadonlyArray<readonly [string, (r: Row) => string]> = [
  ["bench", (r) => r.bench],
  ["metric", (r) => r.metric],
  ["value", (r) => `${r.value} ${r.unit}`],
  ["target", (r) => r.target ?? ""],
  ["met", (r) => (r.met === undefined ? "" : r.met ? "yes" : "NO")],
]
const widths = cols.map(([title, key]) => Math.max(title.length, width(key)))
const line = (cells: ReadonlyArray<string>) => "| " + cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ") + " |"
console.log(line(cols.map(([t]) => t)))
console.log("|" + widths.map((w) => "-".repeat(w + 2)).join("|") + "|")
for (const row of rows) console.log(line(cols.map(([, key]) => key(row))))

const dir = join(import.meta.dirname, "results")
mkdirSync(dir, { recursive: true })
const file = join(dir, `${process.env.BENCH_NAME ?? "latest"}.json`)
writeFileSync(file, JSON.stringify({ at: new Date().toISOString(), node: process.version, rows }, null, 2) + "\n")
console.log(`wrote ${file}`)
