// `ctxd gateway` in front of a real worker fleet: it finds the worker on
// NATS, runs no turns itself, and two gateways serve one session (they hold
// no session state): the worker stores the client's history once.
import Anthropic from "@anthropic-ai/sdk"
import { FakeProvider } from "@ctxd/testing"
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const BIN = join(import.meta.dirname, "..", "services", "worker", "bin", "ctxd.ts")
let h: Harness.Harness
let fake: FakeProvider.FakeProviderServer
const children: Array<ChildProcess> = []
const logs: Array<string> = []

beforeAll(async () => {
  h = await Harness.start()
  fake = await FakeProvider.start()
})
afterAll(async () => {
  for (const c of children) c.kill("SIGKILL")
  await fake?.close()
  await h?.close()
})

const gateway = (): Promise<{ url: string; output: string }> =>
  new Promise((resolve, reject) => {
    let output = ""
    const child = spawn(process.execPath, [BIN, "gateway", "--port", "0"], {
      env: {
        ...process.env,
        NATS_URL: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
        CTXD_SUBJECT_ROOT: h.root,
        CTXD_CONFIG_FILE: "",
        CTXD_GATEWAY_UPSTREAM_ANTHROPIC: fake.url,
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    })
    children.push(child)
    const timer = setTimeout(() => reject(new Error(`no URL printed:\n${output}`)), 60_000)
    const read = (chunk: Buffer) => {
      output += chunk.toString()
      logs.push(chunk.toString())
      const url = /export ANTHROPIC_BASE_URL=(\S+)/.exec(output)?.[1]
      if (url !== undefined && output.includes("Ctrl-C")) {
        clearTimeout(timer)
        resolve({ url, output })
      }
    }
    child.stdout!.on("data", read)
    child.stderr!.on("data", read)
    child.once("exit", (code) => reject(new Error(`exited ${code}:\n${output}`)))
  })

describe("ctxd gateway in front of the fleet", { timeout: 120_000 }, () => {
  it("uses the worker on NATS; two gateways share one session, stored once", async () => {
    const [a, b] = await Promise.all([gateway(), gateway()])
    expect(a.output).toContain(`the fleet on NATS`)
    const headers = { "x-ctxd-tenant": "gwrun", "x-ctxd-session": "fleet-1" }
    const sdkA = new Anthropic({ baseURL: a.url, apiKey: "sk-ant-caller", maxRetries: 0, defaultHeaders: headers })
    const sdkB = new Anthropic({ baseURL: b.url, apiKey: "sk-ant-caller", maxRetries: 0, defaultHeaders: headers })
    // two user messages from the start: a one-message tool-less call under a session header is a side call (its own session)
    const first = [
      { role: "user" as const, content: "Read README.md." },
      { role: "assistant" as const, content: "Which part?" },
      { role: "user" as const, content: "What is in it?" },
    ]
    const answer = await sdkA.messages.create({ model: "claude-sonnet-4-6", max_tokens: 64, system: "Be brief.", messages: first })
    const next = [...first, { role: "assistant" as const, content: answer.content }, { role: "user" as const, content: "Thanks." }]
    await sdkB.messages.create({ model: "claude-sonnet-4-6", max_tokens: 64, system: "Be brief.", messages: next })
    const rows = await h.sql<{ n: string }>(
      "select count(*) as n from ctxd_messages m join ctxd_sessions s on s.id = m.session_id where s.tenant = 'gwrun' and s.session = 'fleet-1'",
    )
    expect(Number(rows[0]!.n)).toBe(5)
    const turns = await h.sql<{ n: string }>(
      "select count(*) as n from ctxd_turns t join ctxd_sessions s on s.id = t.session_id where s.tenant = 'gwrun' and s.session = 'fleet-1'",
    )
    const all = await h.sql("select s.session, t.* from ctxd_turns t join ctxd_sessions s on s.id = t.session_id")
    expect(Number(turns[0]!.n), logs.join("\n") + JSON.stringify(all.map((r) => r.turn_id))).toBe(2)
    expect(logs.join("")).not.toContain("fail_open")
  })
})
