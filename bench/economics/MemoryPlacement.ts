/**
 * Issue 15, item 7: what retrieved memory costs where it sits. Memory
 * retrieved per turn changes every turn; in the cached prefix (the last
 * system section, `memoryPlacement: "system"`) it re-writes everything after
 * it every turn, after the last breakpoint (`"tail"`, the default) it is
 * billed as plain input and the prefix stays cached.
 *
 * Workload: the first 50 tau-bench airline sessions replayed one by one
 * through the worker's stages (`Ctxd.bodies`), each turn retrieving from
 * one agent's memory of ~1,000 documents — every user message of the other
 * 100 tau-bench sessions (100–199), in the in-memory `MemoryStore` with its
 * own ranking — under the default budget (2,200 tokens). Billed by
 * `CacheSim` like the rest of the economics bench, without and with human
 * pauses.
 */
import { MemoryStore } from "@ctxd/db"
import { CostModel } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { Effect } from "effect"
import { round, type Row } from "../Stats.ts"
import * as Ctxd from "./Ctxd.ts"

/** What the caller's economics bench provides: its setup, its billing and its sessions and clock. */
export interface Context {
  readonly setup: Omit<Ctxd.Input, "session" | "times">
  readonly sessions: ReadonlyArray<Ctxd.Session>
  readonly times: (session: Ctxd.Session, pauses: boolean) => ReadonlyArray<number>
  readonly outputs: (session: Ctxd.Session) => ReadonlyArray<number>
  readonly bill: (
    bodies: ReadonlyArray<Record<string, unknown>>,
    times: ReadonlyArray<number>,
    outputs: ReadonlyArray<number>,
  ) => { readonly usage: CostModel.Usage; readonly input: number }
}

const AGENT = "bench"
const SESSIONS = 50

/** When the first memory of the corpus was written; each next one a second later. */
const CORPUS_START = Date.parse("2026-01-01T00:00:00Z")

/**
 * The agent's memory: every user message of tau-bench sessions 100–199,
 * stamped by a clock of its own so that hits of equal rank come in the same
 * order on every run (wall-clock stamps tie at random).
 */
const corpus = (): MemoryStore.MemoryStoreService => {
  let written = 0
  const store = MemoryStore.makeMemory({ now: () => new Date(CORPUS_START + 1_000 * written++) })
  const texts = Workloads.tauBenchSessions(Workloads.fullDataDir())
    .slice(100, 200)
    .flatMap((s) =>
      s.turns.flatMap((t) =>
        t.messages.flatMap((m) =>
          m.role === "user" && typeof m.content === "string" && m.content.trim() !== "" ? [m.content.slice(0, 2_000)] : [],
        ),
      ),
    )
  Effect.runSync(Effect.forEach(texts, (text) => store.remember({ tenant: "bench", agent: AGENT }, { text })))
  return store
}

const placements = ["none", "tail", "system"] as const

export const rows = async (context: Context, label: string): Promise<Array<Row>> => {
  // searched by the worker's own retrieval (`Gather.retrieve`), as a served turn searches its store
  const memory = corpus()
  const bench = `economics (c) memory placement: tau-bench sessions 0–${SESSIONS - 1}, ~1,000 memories, ${label}`
  const out: Array<Row> = []
  for (const [mode, pauses] of [
    ["no gaps", false],
    ["gaps", true],
  ] as const) {
    const totals: Record<string, { input: number; read: number; written: number; uncached: number; memory: number; turns: number }> = {}
    for (const placement of placements) {
      const total = { input: 0, read: 0, written: 0, uncached: 0, memory: 0, turns: 0 }
      for (const session of context.sessions.slice(0, SESSIONS)) {
        const times = context.times(session, pauses)
        // the memory tools stay off: only where retrieved memory sits differs
        const options: Turn.Options =
          placement === "none"
            ? { agent: AGENT, memory: false, memoryTools: false }
            : { agent: AGENT, memoryTools: false, memoryPlacement: placement }
        const bodies = await Ctxd.bodies({
          ...context.setup,
          session,
          times,
          options,
          ...(placement === "none" ? {} : { memory }),
          onReply: (reply) => {
            total.memory += reply.report.tokens.memory
            total.turns++
          },
        })
        const billed = context.bill(bodies, times, context.outputs(session))
        total.input += billed.input
        total.read += billed.usage.cacheRead
        total.written += CostModel.written(billed.usage)
        total.uncached += billed.usage.uncached
      }
      totals[placement] = total
      const tokens = total.read + total.written + total.uncached
      out.push(
        {
          bench,
          metric: `${mode}: memory ${placement}: input tokens (read / written / uncached)`,
          value: tokens,
          unit: `tok (${total.read} / ${total.written} / ${total.uncached})`,
        },
        { bench, metric: `${mode}: memory ${placement}: effective input cost`, value: round(total.input, 0), unit: "tok-eq" },
      )
      if (placement !== "none")
        out.push({
          bench,
          metric: `${mode}: memory ${placement}: memory tokens sent (mean per turn)`,
          value: round(total.memory / Math.max(1, total.turns), 0),
          unit: "tok",
        })
    }
    const tail = totals["tail"]!
    const system = totals["system"]!
    const none = totals["none"]!
    out.push(
      {
        bench,
        metric: `${mode}: memory in the prefix / after the last breakpoint, effective input cost`,
        value: round(system.input / tail.input),
        unit: "×",
        target: "> 1",
        met: system.input > tail.input,
      },
      {
        bench,
        metric: `${mode}: what memory adds, after the last breakpoint / in the prefix`,
        value: round((tail.input - none.input) / Math.max(1, system.input - none.input)),
        unit: "×",
      },
    )
  }
  return out
}
