// `npm run demo`: replays the real tau-bench sessions bundled in examples/data
// through a running worker (or starts one when none answers) and prints, per
// session, how many tokens full history would have cost and what ctxd sent.
import { parseArgs } from "node:util"

const USAGE = `usage: npm run demo [-- options]

replays the 8 tau-bench airline sessions bundled in examples/data through a ctxd worker over NATS
(NATS_URL, default nats://127.0.0.1:4222; CTXD_SUBJECT_ROOT, default ctx): the running worker
that answers there, else one it starts (and stops) itself, and prints per session the tokens of
the full history and what ctxd sent.

options:
  --sessions N              replay the first N sessions (default all)
  --window N                turn option windowMessages (default 20)
  --step N                  turn option windowStep (default 10)
  --format F                anthropic | openai | openai-responses | gemini (default openai)
  -h, --help                this text

e.g. npm run demo -- --sessions 4 --window 40 --step 20 --format anthropic`

const FORMATS = ["anthropic", "openai", "openai-responses", "gemini"] as const

const usageError = (message: string): never => {
  process.stderr.write(`demo: ${message}\n\n${USAGE}\n`)
  process.exit(2)
}

const argv = process.argv.slice(2)
const end = argv.indexOf("--")
if ((end === -1 ? argv : argv.slice(0, end)).some((a) => a === "--help" || a === "-h")) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
let parsed: { sessions?: string | undefined; window: string; step: string; format: string }
try {
  parsed = parseArgs({
    args: argv.filter((a) => a !== "--"),
    options: {
      sessions: { type: "string" },
      window: { type: "string", default: "20" },
      step: { type: "string", default: "10" },
      format: { type: "string", default: "openai" },
    },
  }).values
} catch (e) {
  usageError((e as Error).message)
}
const args = parsed!
const count = (name: string, value: string): number => {
  const n = Number(value)
  return Number.isInteger(n) && n > 0 ? n : usageError(`--${name} must be a positive whole number, got ${JSON.stringify(value)}`)
}
const format = FORMATS.find((f) => f === args.format) ?? usageError(`--format must be one of ${FORMATS.join(", ")}`)
const limit = args.sessions === undefined ? undefined : count("sessions", args.sessions)
const options = { windowMessages: count("window", args.window), windowStep: count("step", args.step) }

const [{ ContextClient }, { Workloads, WorkerProcess }] = await Promise.all([import("@ctxd/client"), import("@ctxd/testing")])
const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const root = process.env.CTXD_SUBJECT_ROOT ?? "ctx"

const client = await ContextClient.connect({ servers, root })
let worker: Awaited<ReturnType<typeof WorkerProcess.start>> | undefined
try {
  await client.health()
  console.log(`using the running worker on ${servers} (root ${root})`)
} catch {
  console.log("no worker answered ctx.v1.health; starting one ...")
  worker = await WorkerProcess.start({ CTXD_SUBJECT_ROOT: root })
}

const run = Date.now().toString(36)
const sessions = Workloads.tauBenchSessions().slice(0, limit)
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
