/**
 * A stub `TurnPort` (records prompts and usage; answers with a body that
 * marks itself as ctxd's) and a gateway in front of the fake provider.
 */
import type { Turn } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import type { PromptReply, PromptRequest, TurnPort, UsageReport } from "../src/Port.ts"
import { type GatewayServer, startServer } from "../src/Server.ts"
import type { ServerOptions } from "../src/Options.ts"

export const MARK = "[ctxd] system"

/** ctxd's body for a request: the client's conversation with ctxd's system prompt. */
export const ctxdBody = (request: PromptRequest): Record<string, unknown> => {
  const b = request.body
  switch (request.api) {
    case "anthropic-messages":
      return { model: request.model, max_tokens: b["max_tokens"], system: MARK, messages: b["messages"] }
    case "openai-chat": {
      const messages = (b["messages"] as Array<{ role: string }>).filter((m) => m.role !== "system" && m.role !== "developer")
      return { model: request.model, messages: [{ role: "system", content: MARK }, ...messages] }
    }
    case "openai-responses":
      return { model: request.model, instructions: MARK, input: b["input"] }
    case "gemini":
      // @google/genai's shape, as ctxd's Gemini renderer writes it
      return {
        model: request.model,
        contents: b["contents"],
        config: { systemInstruction: { parts: [{ text: MARK }] }, maxOutputTokens: 256 },
      }
  }
}

export interface StubPort extends TurnPort {
  readonly prompts: Array<PromptRequest>
  readonly usages: Array<UsageReport>
  /** Replaces how prompts are answered. */
  answer: (request: PromptRequest, signal: AbortSignal) => Promise<PromptReply>
  readyNow: boolean
}

let turns = 0

export const stubPort = (): StubPort => {
  const port: StubPort = {
    prompts: [],
    usages: [],
    readyNow: true,
    answer: (request) => Promise.resolve({ body: ctxdBody(request), headers: {}, turnId: `turn-${++turns}`, report: {} as Turn.Report }),
    prompt: (request, signal) => {
      port.prompts.push(request)
      return port.answer(request, signal)
    },
    usage: (report) => {
      port.usages.push(report)
    },
    ready: () => Promise.resolve(port.readyNow),
    close: () => Promise.resolve(),
  }
  return port
}

export interface Stack {
  readonly fake: FakeProvider.FakeProviderServer
  readonly gateway: GatewayServer
  readonly port: StubPort
  readonly close: () => Promise<void>
}

/** The fake provider, and the gateway in front of it for all three providers. */
export const stack = async (options: Partial<ServerOptions> = {}, fakeOptions: FakeProvider.StartOptions = {}): Promise<Stack> => {
  const fake = await FakeProvider.start(fakeOptions)
  const port = stubPort()
  const gateway = await startServer({
    turns: port,
    upstreams: { anthropic: fake.url, openai: fake.url, google: fake.url },
    ...options,
  })
  return {
    fake,
    gateway,
    port,
    close: async () => {
      await gateway.close()
      await fake.close()
    },
  }
}

/** Waits until `check` holds (the usage report follows the response's end by a tick). */
export const eventually = async (check: () => boolean, ms = 2_000): Promise<void> => {
  const until = Date.now() + ms
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not met in time")
    await new Promise((r) => setTimeout(r, 5))
  }
}
