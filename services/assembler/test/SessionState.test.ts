/**
 * When a commit records its session's length: the history of session
 * lengths counts a session by the bucket of its recorded length only
 * (`SessionLengths.bucketOf`), so a commit records when the bucket changes,
 * when the agent changes, and always from a state that recorded none yet.
 */
import { SessionLengths } from "@ctxd/context"
import { describe, expect, it } from "vitest"
import * as SessionState from "../src/SessionState.ts"

/** A state of `turns` turns whose last recorded length was under `agent`. */
const at = (turns: number, agent: string | undefined) => ({ ...SessionState.empty("o200k_base"), turns, lengthAgent: agent })

describe("SessionState.recordsLength", () => {
  it("records from a state that recorded none yet (new here or reloaded), whatever the turns", () => {
    expect(SessionState.recordsLength(at(0, undefined), "coder", 0)).toBe(true)
    expect(SessionState.recordsLength(at(500, undefined), "coder", 500)).toBe(true)
  })

  it("records every turn below 64 turns, then once per bucket", () => {
    expect(SessionState.recordsLength(at(10, "coder"), "coder", 11)).toBe(true)
    expect(SessionState.recordsLength(at(63, "coder"), "coder", 64)).toBe(true)
    // 64–71 is one bucket: 65 is not recorded, 72 is
    expect(SessionState.recordsLength(at(64, "coder"), "coder", 65)).toBe(false)
    expect(SessionState.recordsLength(at(71, "coder"), "coder", 72)).toBe(true)
    // a turn that adds no assistant message (same turns) records nothing new
    expect(SessionState.recordsLength(at(10, "coder"), "coder", 10)).toBe(false)
  })

  it("records at once when the agent changes", () => {
    expect(SessionState.recordsLength(at(65, "coder"), "reviewer", 66)).toBe(true)
  })

  it("a session's recorded lengths give the histogram every turn's would: the bucket of its last length", () => {
    // a session playing 1 to 3 turns a commit up to 2,000 turns, recording as the rule says
    let state = at(0, undefined)
    let recorded = -1
    for (let commit = 0; state.turns < 2_000; commit++) {
      const turns = state.turns + 1 + (commit % 3)
      if (SessionState.recordsLength(state, "coder", turns)) recorded = turns
      state = { ...state, turns, lengthAgent: "coder" }
      expect(SessionLengths.bucketOf(recorded)).toBe(SessionLengths.bucketOf(state.turns))
    }
  })

  it("advance keeps the agent a commit recorded, and keeps the last one when a commit recorded none", () => {
    const state = SessionState.empty("o200k_base")
    const committed = (recorded: string | undefined): SessionState.Outcome => ({
      _tag: "Committed",
      rows: [],
      loop: state.loop,
      waste: state.waste,
      toolsets: { loaded: [], offered: [] } as never,
      recall: false,
      landmarks: undefined as never,
      maskGrid: undefined,
      rung: undefined,
      view: undefined as never,
      scheduled: false,
      knowledgeIndex: { sent: "" },
      learnings: undefined,
      shape: undefined,
      at: 0,
      recorded,
    })
    SessionState.advance(state, committed("coder"))
    expect(state.lengthAgent).toBe("coder")
    SessionState.advance(state, committed(undefined))
    expect(state.lengthAgent).toBe("coder")
  })
})
