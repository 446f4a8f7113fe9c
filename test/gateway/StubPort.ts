/**
 * A stub `TurnPort` for the CLI runs through the gateway: it answers every
 * prompt with the client's own conversation plus a marker in the system
 * prompt (so the fake's log shows whose body went upstream), and records
 * the prompts and usage reports the gateway gives it.
 */
import type { Turn } from "@ctxd/contracts"
import type { Port } from "@ctxd/gateway"

/** What ctxd's bodies carry and the clients' never do. */
export const MARK = "[ctxd-stub] prompt assembled by ctxd"

const list = (u: unknown): Array<unknown> => (Array.isArray(u) ? [...u] : [])

const record = (u: unknown): Record<string, unknown> => (typeof u === "object" && u !== null ? (u as Record<string, unknown>) : {})

/** The keys ctxd owns of each API, from the client's body, the system prompt marked. */
const ctxdBody = (request: Port.PromptRequest): Record<string, unknown> => {
  const b = request.body
  switch (request.api) {
    case "anthropic-messages": {
      const system = typeof b["system"] === "string" ? [{ type: "text", text: b["system"] }] : list(b["system"])
      return { messages: b["messages"], tools: b["tools"], system: [...system, { type: "text", text: MARK }] }
    }
    case "openai-chat":
      return { messages: [{ role: "system", content: MARK }, ...list(b["messages"])], tools: b["tools"] }
    case "openai-responses":
      return { input: b["input"], tools: b["tools"], instructions: MARK }
    case "gemini": {
      const parts = list(record(b["systemInstruction"])["parts"])
      return { contents: b["contents"], tools: b["tools"], systemInstruction: { parts: [...parts, { text: MARK }] } }
    }
  }
}

export interface StubPort extends Port.TurnPort {
  readonly prompts: Array<Port.PromptRequest>
  readonly usages: Array<Port.UsageReport>
}

export const make = (): StubPort => {
  let turns = 0
  const port: StubPort = {
    prompts: [],
    usages: [],
    prompt: (request) => {
      port.prompts.push(request)
      const body = Object.fromEntries(Object.entries(ctxdBody(request)).filter(([, v]) => v !== undefined))
      return Promise.resolve({ body, headers: {}, turnId: `turn-${++turns}`, report: {} as Turn.Report })
    },
    usage: (report) => {
      port.usages.push(report)
    },
    ready: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  }
  return port
}
