/**
 * The replays the report tests read: the bundled samples (`examples/data`,
 * the SWE-agent files with the longest names and the tau-bench sessions),
 * and a small chat log whose second turn has a tool call that was never
 * answered (the input the replay must flag as repaired).
 */
import type { AgentLogs } from "@ctxd/context"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Files from "../src/cli/Files.ts"
import * as Replay from "../src/cli/Replay.ts"
import type { Run } from "../src/cli/ReplayExplain.ts"

export const SAMPLES = join(import.meta.dirname, "..", "..", "..", "examples", "data")

/** A chat log: the assistant calls `weather` twice, only the first call (`c1`) gets its result. */
export const unansweredCall = {
  messages: [
    { role: "system", content: "You are a helpful agent." },
    { role: "user", content: "Look up the weather in Paris and in Rome." },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
        { id: "c2", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: "Paris: 18 C, sunny" },
    { role: "assistant", content: "Paris is sunny. Let me try Rome again." },
    { role: "user", content: "ok" },
    { role: "assistant", content: "Done." },
  ],
}

/** The sessions of `paths` (files or directories), as `ctxd replay` reads them. */
export const sessionsOf = (paths: ReadonlyArray<string>): Array<AgentLogs.Session> =>
  Files.files(paths).flatMap((file) => {
    const read = Files.read(file)
    return read._tag === "Unrecognised" ? [] : read.sessions
  })

/** The unanswered-call log written to a file of its own (named `unanswered-call`). */
export const unansweredCallFile = (): string => {
  const file = join(mkdtempSync(join(tmpdir(), "ctxd-replay-report-")), "unanswered-call.json")
  writeFileSync(file, JSON.stringify(unansweredCall))
  return file
}

/** `sessions` replayed for `model` with the defaults, as the command line does. */
export const replay = async (model: string, sessions: ReadonlyArray<AgentLogs.Session>): Promise<Run> => {
  const setup = Replay.setup({
    model,
    options: {},
    gapSeconds: Replay.defaults.gapSeconds,
    slidingMessages: Replay.defaults.slidingMessages,
  })
  const replayer = Replay.make(setup)
  const results: Array<Replay.SessionResult> = []
  try {
    for (const s of sessions) results.push(await replayer.session(s))
  } finally {
    await replayer.dispose()
  }
  return { setup, sessions: results, total: Replay.sum(results) }
}
