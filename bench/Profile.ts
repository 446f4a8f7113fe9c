/**
 * A V8 CPU profile (`node --cpu-prof`) summed by self time into the groups
 * the per-turn cost is argued in (issue 18): the Effect runtime, GC, socket
 * writes and reads, JSON, the tokenizer, hashing, compression, Postgres and
 * NATS client code, the pipeline (`libs/context` and the turn stages), the
 * rest of ctxd's own code, and everything else. Idle time is left out.
 *
 * Only samples inside `windows` count when given: intervals of
 * `process.hrtime` in microseconds, the clock V8 stamps its samples with on
 * Linux (CLOCK_MONOTONIC), so a bench can keep its closed loops and drop the
 * worker's start-up.
 */
import { readFileSync } from "node:fs"

interface Node {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string }
}
interface CpuProfile {
  readonly nodes: ReadonlyArray<Node>
  readonly startTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** The groups, in the order they are reported. */
export const GROUPS = [
  "effect runtime",
  "GC",
  "socket",
  "JSON",
  "tokenizer",
  "hashing",
  "compression",
  "postgres client",
  "nats client",
  "pipeline",
  "ctxd other",
  "other",
] as const
export type Group = (typeof GROUPS)[number]

const SOCKET = new Set(["writeBuffer", "writev", "writeUtf8String", "writeLatin1String", "onStreamRead", "read"])

/** The group of one frame (by its function and script). */
export const groupOf = (functionName: string, url: string): Group | "idle" => {
  if (functionName === "(idle)") return "idle"
  if (functionName === "(garbage collector)") return "GC"
  if (SOCKET.has(functionName) && url === "") return "socket"
  if (url.includes("node_modules/effect/")) return "effect runtime"
  if (url.includes("node_modules/js-tiktoken/") || url.includes("libs/tokens/src/internal/bpe")) return "tokenizer"
  if (url.includes("node:internal/crypto") || url.includes("node:crypto")) return "hashing"
  if (url.includes("node:zlib") || url.includes("replyCodec")) return "compression"
  if (
    url.includes("libs/nats/src/Json.ts") ||
    url.includes("node:internal/encoding") ||
    functionName === "parse" ||
    functionName === "stringify"
  )
    return "JSON"
  if (/node_modules\/(pg|pg-protocol|pg-pool|pg-types)\//.test(url)) return "postgres client"
  if (url.includes("node_modules/@nats-io/")) return "nats client"
  if (url.includes("libs/context/src/") || url.includes("services/assembler/src/turn/")) return "pipeline"
  if (url.includes("/libs/") || url.includes("/services/")) return "ctxd other"
  return "other"
}

/** Self time (ms) per group, and the total (ms, idle excluded). */
export interface Summary {
  readonly total: number
  readonly byGroup: Readonly<Record<Group, number>>
}

const inside = (windows: ReadonlyArray<readonly [number, number]> | undefined, t: number) =>
  windows === undefined || windows.some(([from, to]) => t >= from && t <= to)

/** Sums the profile at `file` by group (see the module doc for `windows`). */
export const summarize = (file: string, windows?: ReadonlyArray<readonly [number, number]>): Summary => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile
  const groups = new Map<number, Group | "idle">()
  for (const node of profile.nodes) groups.set(node.id, groupOf(node.callFrame.functionName, node.callFrame.url))
  const byGroup = Object.fromEntries(GROUPS.map((g) => [g, 0])) as Record<Group, number>
  let total = 0
  let t = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0
    t += delta
    if (!inside(windows, t)) continue
    const group = groups.get(profile.samples[i]!)
    if (group === undefined || group === "idle") continue
    byGroup[group] += delta / 1000
    total += delta / 1000
  }
  return { total, byGroup }
}
