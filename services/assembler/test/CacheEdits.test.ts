/**
 * `options.cacheEdits` (issue 37, item 8): `guarded`, the default, holds an
 * optional edit the session's savings against its whole history do not
 * cover (`Ledger`); `expected` makes it when rent-or-buy and the expected
 * turns say so, whatever the session has saved.
 */
import type { Turn } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

const tools = [
  { name: "read_file", description: "Reads a file.", input_schema: { type: "object", properties: { path: { type: "string" } } } },
]

/** A 40-step tool-use loop, 5 s apart (the cache stays warm), under a system prompt above the 4,096-token minimum. */
const play = async (options: Record<string, unknown>): Promise<Array<Turn.TurnReply>> => {
  const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
  const replies: Array<Turn.TurnReply> = []
  try {
    for (let k = 0; k < 40; k++) {
      const messages =
        k === 0
          ? [{ role: "user", content: "Read every file of the project, one by one." }]
          : [
              { role: "assistant", content: [{ type: "tool_use", id: `c${k}`, name: "read_file", input: { path: `f${k}.ts` } }] },
              { role: "user", content: [{ type: "tool_result", tool_use_id: `c${k}`, content: `line ${k} `.repeat(300) }] },
            ]
      const request = {
        turnId: `t${k}`,
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-sonnet-5-5" },
        system: [{ id: "rules", text: "Follow the project's rules. ".repeat(1_200) }],
        tools,
        messages,
        options: { windowMessages: 16, windowStep: 4, expectedTurns: 500, toolCompression: "none", ...options },
      }
      replies.push(await turns.turn("acme", "s1", request as unknown as Turn.TurnRequest, undefined, k * 5_000))
    }
  } finally {
    await turns.dispose()
  }
  return replies
}

/** The turn of the first window cut (-1: none). */
const firstCut = (replies: ReadonlyArray<Turn.TurnReply>) => replies.findIndex((r) => r.report.cache.reason === "window")

describe("options.cacheEdits", () => {
  it("guarded (the default) holds the window's cut until the session's savings cover it; expected makes it earlier", async () => {
    const guarded = await play({})
    const expected = await play({ cacheEdits: "expected" })
    expect(firstCut(expected)).toBeGreaterThan(0)
    // every prompt before its first cut is the whole history: nothing saved, the cut waits for the slack
    expect(firstCut(guarded)).toBeGreaterThan(firstCut(expected))
    const before = guarded[firstCut(guarded) - 1]!.report
    expect(before.messages.sent).toBe(before.messages.stored)
    expect(before.cache.deferred).toContain("window")
    // the default is `guarded`
    expect(JSON.stringify((await play({ cacheEdits: "guarded" })).map((r) => r.request))).toBe(
      JSON.stringify(guarded.map((r) => r.request)),
    )
  })
})
