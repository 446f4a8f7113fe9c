/**
 * Waste detection: per session, which tools were sent and which the model
 * ever called. A tool sent on every turn but never called is pure cost; the
 * waste ratio is the share of all tool-definition tokens sent in the session
 * that went to tools never called (so far).
 *
 * The state is incremental and JSON-safe: fold each turn in with
 * {@link record} and persist it with the session.
 */
import type { Conversation, Turn } from "@ctxd/contracts"

/** Per tool: turns it was sent in, tokens sent over those turns, calls seen. */
export interface ToolUse {
  readonly sentTurns: number
  readonly sentTokens: number
  readonly calls: number
}

/** Per-session state (JSON-safe). */
export interface State {
  readonly tools: Readonly<Record<string, ToolUse>>
}

/** A session with nothing recorded yet. */
export const empty: State = { tools: {} }

const none: ToolUse = { sentTurns: 0, sentTokens: 0, calls: 0 }

/**
 * Folds one turn in: `incoming` (the turn's new messages; their assistant
 * tool calls count as calls, by tool name) and `sent` (the tools of the
 * request built for this turn). `tokensOf` gives a tool definition's tokens;
 * default 1 per tool, which makes the ratio a count of definitions sent.
 * Virtual tools count like any other.
 */
export const record = (
  state: State,
  sent: ReadonlyArray<Conversation.Tool>,
  incoming: ReadonlyArray<Conversation.Message>,
  tokensOf: (tool: Conversation.Tool) => number = () => 1,
): State => {
  const tools: Record<string, ToolUse> = { ...state.tools }
  for (const m of incoming) {
    if (m.role !== "assistant") continue
    for (const p of m.parts) {
      if (p.type !== "tool_call") continue
      const use = tools[p.name] ?? none
      tools[p.name] = { ...use, calls: use.calls + 1 }
    }
  }
  for (const t of sent) {
    const use = tools[t.name] ?? none
    tools[t.name] = { ...use, sentTurns: use.sentTurns + 1, sentTokens: use.sentTokens + tokensOf(t) }
  }
  return { tools }
}

/** Names of tools sent at least once and never called, sorted. */
export const sentNeverCalled = (state: State): Array<string> =>
  Object.entries(state.tools)
    .filter(([, u]) => u.sentTurns > 0 && u.calls === 0)
    .map(([name]) => name)
    .sort()

/** Tokens sent for never-called tools / all tool tokens sent (0 when nothing was sent). */
export const ratio = (state: State): number => {
  let wasted = 0
  let total = 0
  for (const u of Object.values(state.tools)) {
    total += u.sentTokens
    if (u.calls === 0) wasted += u.sentTokens
  }
  return total === 0 ? 0 : wasted / total
}

/** The `report.waste` field. */
export const report = (state: State): Turn.WasteReport => ({ sentNeverCalled: sentNeverCalled(state), ratio: ratio(state) })
