// `npm run demo`: replays the real tau-bench sessions of ../shared/data through
// a running worker (or starts one when none answers) and prints, per session,
// how many tokens full history would have cost and what ctxd sent.
//
//   npm run demo                        10 sessions, window 20 / step 10
//   npm run demo -- --sessions 50 --window 40 --step 20 --format anthropic
//   --format: anthropic | openai (default) | openai-responses | gemini
import { ContextClient } from "@ctxd/client"
import { Workloads, WorkerProcess } from "@ctxd/testing"
import { parseArgs } from "node:util"

const { values: args } = parseArgs({
  options: {
    sessions: { type: "string", default: "10" },
    window: { type: "string", default: "20" },
    step: { type: "string", default: "10" },
    format: { type: "string", default: "openai" },
  },
})
const format = Workloads.formats.find((f) => f === args.format)
if (format === undefined) {
  console.error(`--format must be one of ${Workloads.formats.join(", ")}`)
  process.exit(2)
}
const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const root = process.env.CTXD_SUBJECT_ROOT ?? "ctx"

const client = await ContextClient.connect({ servers, root })
let worker: WorkerProcess.WorkerProcess | undefined
try {
  await client.health()
  console.log(`using the running worker on ${servers} (root ${root})`)
} catch {
  console.log("no worker answered ctx.v1.health; starting one ...")
  worker = await WorkerProcess.start({ CTXD_SUBJECT_ROOT: root })
}

const run = Date.now().toString(36)
const sessions = Workloads.tauBenchSessions().slice(0, Number(args.sessions))
const options = { windowMessages: Number(args.window), windowStep: Number(args.step) }
const rows: Array<Record<string, string | number>> = []
let fullSum = 0
let sentSum = 0
try {
  for (const session of sessions) {
    const { turns, system, model } = Workloads.inFormat(session, format)
    let full = 0
    let sent = 0
    let peak = 0
    let messages = 0
    for (const [k, fields] of turns.entries()) {
      const request = { turnId: `turn-${k}`, model, system, options, ...fields }
      const reply = await client.turn("demo", `${session.id}-${run}`, request)
      const t = reply.report.tokens
      // Full history: every stored message and the tool schemas uncompressed.
      full += t.system + t.tools + (reply.report.tools?.saved ?? 0) + t.fullHistory
      sent += t.total
      peak = Math.max(peak, reply.report.utilization)
      messages = reply.report.messages.stored
    }
    fullSum += full
    sentSum += sent
    rows.push({
      session: session.id,
      turns: turns.length,
      messages,
      "full history tok": full,
      "sent tok": sent,
      saved: `${(100 * (1 - sent / full)).toFixed(1)} %`,
      "peak budget use": `${(100 * peak).toFixed(2)} %`,
    })
  }
} finally {
  await client.close()
  await worker?.stop()
}

const keys = Object.keys(rows[0] ?? {})
const widths = keys.map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)))
const line = (cells: ReadonlyArray<string>) => "| " + cells.map((c, i) => c.padStart(widths[i]!)).join(" | ") + " |"
console.log(
  `\n${format} format, window ${options.windowMessages} messages (step ${options.windowStep}); tokens summed over every turn of the session\n`,
)
console.log(line(keys))
console.log("|" + widths.map((w) => "-".repeat(w + 1) + ":").join("|") + "|")
for (const row of rows) console.log(line(keys.map((k) => String(row[k]))))
console.log(`\nall sessions: full history ${fullSum} tokens, sent ${sentSum} tokens, saved ${(100 * (1 - sentSum / fullSum)).toFixed(1)} %`)
