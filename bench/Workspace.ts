/**
 * Workspace bundles: what naming a bundle saves on the wire per turn, and
 * what a bundle read costs the turn's shell from the files (a miss) and from
 * memory (a hit). The bundle: the tau-bench airline policy (the real
 * workload's system prompt) as `AGENTS.md`, with a short identity and soul.
 */
import { WorkspaceCache } from "@ctxd/assembler"
import { Workloads } from "@ctxd/testing"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { quantile, round, type Row } from "./Stats.ts"

export const run = async (reads = 2_000): Promise<Row[]> => {
  const policy = Workloads.tauBenchSessions(Workloads.fullDataDir())[0]!.system
  const root = mkdtempSync(join(tmpdir(), "ctxd-bench-workspace-"))
  try {
    mkdirSync(join(root, "airline"))
    const files = {
      "IDENTITY.md": "# Identity\nYou are the airline's booking agent.",
      "SOUL.md": "# Soul\nBe exact; never guess.",
      "AGENTS.md": policy,
    }
    for (const [name, text] of Object.entries(files)) writeFileSync(join(root, "airline", name), text)
    const inline = Object.entries(files).map(([id, text]) => ({ id, text }))
    const ref = { workspace: "airline" }
    const saved = Buffer.byteLength(JSON.stringify({ system: inline })) - Buffer.byteLength(JSON.stringify({ system: ref }))

    const timed = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const miss: number[] = []
          const hit: number[] = []
          // maxEntries 0: nothing is kept, every read is a miss
          const cold = yield* WorkspaceCache.make({ root, maxEntries: 0 })
          const warm = yield* WorkspaceCache.make({ root })
          for (let i = 0; i < reads; i++) {
            let t = performance.now()
            yield* cold.read(ref, "acme")
            miss.push(performance.now() - t)
            t = performance.now()
            yield* warm.read(ref, "acme")
            hit.push(performance.now() - t)
          }
          return { miss, hit }
        }),
      ),
    )
    return [
      { bench: "workspace", metric: "request bytes saved per turn (tau-bench policy bundle)", value: saved, unit: "B" },
      { bench: "workspace", metric: "bundle read p50, miss (3 files from disk)", value: round(quantile(timed.miss, 0.5)), unit: "ms" },
      { bench: "workspace", metric: "bundle read p99, miss", value: round(quantile(timed.miss, 0.99)), unit: "ms" },
      { bench: "workspace", metric: "bundle read p50, hit (memory)", value: round(quantile(timed.hit, 0.5), 4), unit: "ms" },
      { bench: "workspace", metric: "bundle read p99, hit", value: round(quantile(timed.hit, 0.99), 4), unit: "ms" },
    ]
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}
