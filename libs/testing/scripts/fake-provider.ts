// Runs the fake Anthropic/OpenAI provider on 127.0.0.1 for demos and manual tests.
//
//   node libs/testing/scripts/fake-provider.ts [--port 4010] [--latency 0] [--error-rate 0] [--seed 1]
//
// Environment (flags win): FAKE_PROVIDER_PORT, FAKE_PROVIDER_LATENCY_MS, FAKE_PROVIDER_ERROR_RATE.
// Change faults at runtime with `curl -X POST $URL/_control -d '{"failNext":2}'`; read the log at `$URL/_requests`.
import { parseArgs } from "node:util"
import * as FakeProvider from "../src/FakeProvider.ts"

const usage = `usage: node libs/testing/scripts/fake-provider.ts [options]
  --port <n>          port to listen on (env FAKE_PROVIDER_PORT, default 4010; 0 = any free port)
  --latency <ms>      added latency per request (env FAKE_PROVIDER_LATENCY_MS, default 0)
  --error-rate <0-1>  share of requests answered with a 500 (env FAKE_PROVIDER_ERROR_RATE, default 0)
  --seed <n>          seed of the error-rate PRNG (default 1)
  -h, --help          show this help`

const { values } = parseArgs({
  options: {
    port: { type: "string" },
    latency: { type: "string" },
    "error-rate": { type: "string" },
    seed: { type: "string" },
    help: { type: "boolean", short: "h" },
  },
})

if (values.help === true) {
  console.log(usage)
  process.exit(0)
}

const numberOf = (name: string, raw: string | undefined, fallback: number): number => {
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n)) {
    console.error(`fake-provider: ${name} must be a number, got ${JSON.stringify(raw)}\n${usage}`)
    process.exit(2)
  }
  return n
}

const env = process.env
let server: FakeProvider.FakeProviderServer
try {
  server = await FakeProvider.start({
    host: "127.0.0.1",
    port: numberOf("--port", values.port ?? env["FAKE_PROVIDER_PORT"], 4010),
    latencyMs: numberOf("--latency", values.latency ?? env["FAKE_PROVIDER_LATENCY_MS"], 0),
    errorRate: numberOf("--error-rate", values["error-rate"] ?? env["FAKE_PROVIDER_ERROR_RATE"], 0),
    seed: numberOf("--seed", values.seed, 1),
  })
} catch (e) {
  console.error(`fake-provider: cannot start: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
}

console.log(`fake provider listening on ${server.url}`)
console.log("set these for the SDKs (any API key works):")
console.log(`  ANTHROPIC_BASE_URL=${server.url}`)
console.log(`  OPENAI_BASE_URL=${server.openaiBaseURL}`)
console.log(`control: POST ${server.url}/_control   log: GET ${server.url}/_requests`)

let stopping = false
const stop = (signal: string) => {
  if (stopping) return
  stopping = true
  console.log(`fake provider: ${signal}, shutting down`)
  const force = setTimeout(() => process.exit(1), 5_000)
  force.unref()
  server.close().then(
    () => process.exit(0),
    () => process.exit(1),
  )
}
process.on("SIGINT", () => stop("SIGINT"))
process.on("SIGTERM", () => stop("SIGTERM"))
