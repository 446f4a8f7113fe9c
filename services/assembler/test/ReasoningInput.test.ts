/**
 * Bad reasoning input: a thinking block without its signature (Anthropic)
 * and a reasoning item without the item it led to (Responses) are a coded
 * `BadRequest` naming the path, and nothing of the turn is stored.
 */
import { Errors, type Turn } from "@ctxd/contracts"
import { KnowledgeStore, SessionStore } from "@ctxd/db"
import { Judge } from "@ctxd/loop-detector"
import { ShardLeases } from "@ctxd/sharding"
import { TokenCounter } from "@ctxd/token-counter"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Assembler } from "../src/Assembler.ts"
import * as AssemblerConfig from "../src/AssemblerConfig.ts"
import * as CompactionPort from "../src/CompactionPort.ts"
import * as LengthHistory from "../src/LengthHistory.ts"
import * as WorkspaceCache from "../src/WorkspaceCache.ts"

const runtime = ManagedRuntime.make(
  Assembler.Default.pipe(
    Layer.provide(
      Layer.mergeAll(
        AssemblerConfig.layer(),
        ShardLeases.layerMemory(),
        SessionStore.layerMemory(),
        KnowledgeStore.layerMemory,
        LengthHistory.layerNone,
        CompactionPort.layerDisabled,
        WorkspaceCache.layerMemory({}),
        TokenCounter.layer({ backend: "tiktoken" }),
        Layer.succeed(Judge.Judge, { ask: () => Effect.die("no judge") }),
      ),
    ),
  ),
)
afterAll(() => runtime.dispose())

type Reply = Record<string, unknown> & { readonly ok: boolean }
const send = (session: string, request: Record<string, unknown>) =>
  Effect.flatMap(Assembler, (a) => a.turn("acme", session, new TextEncoder().encode(JSON.stringify(request))))
const turn = (session: string, request: Record<string, unknown>): Promise<Reply> =>
  runtime.runPromise(send(session, request).pipe(Effect.map((answer) => answer.reply as unknown as Reply)))
/** The coded error a turn fails with: its code and path. */
const refusal = (session: string, request: Record<string, unknown>) =>
  runtime.runPromise(
    Effect.flip(send(session, request)).pipe(Effect.map((e) => ({ code: Errors.codeOf(e), path: (e as { readonly path?: string }).path }))),
  )
const stored = (reply: Reply): number => (reply["report"] as Turn.Report).messages.stored

describe("reasoning the provider would refuse is refused at the door", () => {
  it("anthropic: a thinking block without its signature names messages[1].content[0].signature; nothing stored", async () => {
    const base = { format: "anthropic", model: { provider: "anthropic", name: "claude-sonnet-5-5" }, system: "Be brief." }
    const bad = await refusal("a1", {
      ...base,
      turnId: "t0",
      messages: [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hm" },
            { type: "text", text: "hello" },
          ],
        },
        { role: "user", content: "and?" },
      ],
    })
    expect(bad).toEqual({ code: "BadRequest", path: "messages[1].content[0].signature" })
    const redacted = await refusal("a1", {
      ...base,
      turnId: "t1",
      messages: [{ role: "assistant", content: [{ type: "redacted_thinking" }] }],
    })
    expect(redacted).toEqual({ code: "BadRequest", path: "messages[0].content[0].data" })
    // the session is still empty: the next turn's message is the only one stored
    const good = await turn("a1", { ...base, turnId: "t2", messages: [{ role: "user", content: "hi" }] })
    expect(good.ok).toBe(true)
    expect(stored(good)).toBe(1)
  })

  it("responses: a reasoning item without its following item names input[1]; nothing stored", async () => {
    const base = { format: "openai-responses", model: { provider: "openai", name: "gpt-5.1" } }
    const reasoning = { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "enc" }
    const bad = await refusal("r1", { ...base, turnId: "t0", input: [{ role: "user", content: "hi" }, reasoning] })
    expect(bad).toEqual({ code: "BadRequest", path: "input[1]" })
    const followed = await turn("r1", {
      ...base,
      turnId: "t1",
      input: [
        { role: "user", content: "hi" },
        reasoning,
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "hello" }] },
        { role: "user", content: "and?" },
      ],
    })
    expect(followed.ok).toBe(true)
    // the reasoning item goes with the message it led to: user, assistant, user
    expect(stored(followed)).toBe(3)
  })
})
