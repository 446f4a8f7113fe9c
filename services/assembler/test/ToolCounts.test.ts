/**
 * A session's compressed tools are made and counted once, not every turn:
 * the turn's local counter is the same function from turn to turn (one per
 * encoding), and the pipeline keeps a compressed list with its count by the
 * tool list and that counter.
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import { Normalize } from "@ctxd/context"
import { describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

const tools: ReadonlyArray<Conversation.Tool> = ["read_file", "write_file", "search"].map((name) => ({
  name,
  description: `${name}: ${"a long description the truncate level shortens. ".repeat(40)}`,
  inputSchema: { type: "object", properties: { path: { type: "string", description: "where ".repeat(50) } } },
}))

describe("tool compression across turns", () => {
  it("compresses and counts a session's tools on its first turn only, while the tool list holds", async () => {
    // counts of lists other than the session's own (compressed ones)
    let compressedCounts = 0
    const spy = {
      ...local,
      countTools: (list: ReadonlyArray<Conversation.Tool>) => {
        if (list.length === tools.length && list[0] !== tools[0]) compressedCounts++
        return local.countTools(list)
      },
    }
    const turns = InProcessTurns.make({ local: spy, count: InProcessTurns.countLocally(spy) })
    const model = { provider: "anthropic", name: "claude-sonnet-4-5" }
    const replies: Array<Turn.TurnReply> = []
    let afterFirst = 0
    for (let k = 0; k < 4; k++) {
      const messages =
        k === 0
          ? [{ role: "user", content: "hello" }]
          : [
              { role: "assistant", content: `ok ${k}` },
              { role: "user", content: `next ${k}` },
            ]
      const request = {
        turnId: `t${k}`,
        format: "anthropic",
        model,
        system: "Be brief.",
        messages,
        options: { toolCompression: "truncate" },
      }
      // the session's system and tools as the worker's decode keeps them: the same objects every turn
      const normalized: Normalize.NormalizedRequest = {
        system: [{ id: "system", text: "Be brief.", cache: "5m" }],
        tools,
        messages: Normalize.fromAnthropicIndexed(messages as never),
      }
      replies.push(await turns.turn("acme", "s1", request as unknown as Turn.TurnRequest, normalized))
      if (k === 0) afterFirst = compressedCounts
    }
    expect(replies.every((r) => r.report.tools?.compression === "truncate")).toBe(true)
    expect(new Set(replies.map((r) => r.report.tools?.tokens)).size).toBe(1)
    expect(replies[3]!.report.tools!.tokens).toBeLessThan(local.countTools(tools))
    // the first turn counted its compressed list; turns 2 to 4 reused it and its count
    expect(afterFirst).toBeGreaterThan(0)
    expect(compressedCounts).toBe(afterFirst)
  })
})
