/**
 * Waste detection: per session, which tools were sent and which the model
 * ever called. A tool sent on every turn but never called is pure cost; the
 * waste ratio is the share of all tool-definition tokens sent in the session
 * that went to tools never called (so far).
 *
 * The state is incremental and persistent: {@link record} folds one turn in
 * and returns a new state, leaving the one it was given as it was (a turn's
 * outcome applies only once committed). It lives with the session in memory
 * and is rebuilt from the history's calls when a session is loaded.
 *
 * A turn that sends the same tool list as the turn before (the same array,
 * as the tools stage hands it while the selection holds) with the same token
 * counts copies nothing: the list's turns are counted as a run, folded into
 * the per-tool totals only when another list is sent; a tool call copies the
 * calls only (issue 18: copying every tool's totals every turn took ~20 µs
 * of a turn in the worker). The tokens of each tool sent are still looked up
 * every turn (remembered by the counter), so a change of encoding shows.
 */
import type { Conversation, Turn } from "@ctxd/contracts"

/** Per tool: turns it was sent in, tokens sent over those turns, calls seen. */
export interface ToolUse {
  readonly sentTurns: number
  readonly sentTokens: number
  readonly calls: number
}

/** One tool list sent on consecutive turns, with per tool name its definitions' tokens and count in the list. */
interface Run {
  readonly sent: ReadonlyArray<Conversation.Tool>
  readonly tokens: ReadonlyArray<number>
  readonly perTurn: ReadonlyMap<string, { readonly tokens: number; readonly count: number }>
  readonly turns: number
}

/** Per-session state. */
export interface State {
  /** Per tool name, turns and tokens sent before {@link State.run}. */
  readonly folded: ReadonlyMap<string, { readonly turns: number; readonly tokens: number }>
  /** The tool list of the latest turns, sent unchanged. */
  readonly run: Run | undefined
  /** Per tool name, calls seen. */
  readonly calls: ReadonlyMap<string, number>
}

/** A session with nothing recorded yet. */
export const empty: State = { folded: new Map(), run: undefined, calls: new Map() }

/** `sentNeverCalled` per state, carried to the next state while neither the names sent nor the calls change. */
const neverCalledOf = new WeakMap<State, ReadonlyArray<string>>()

const runOf = (sent: ReadonlyArray<Conversation.Tool>, tokens: ReadonlyArray<number>): Run => {
  const perTurn = new Map<string, { tokens: number; count: number }>()
  sent.forEach((tool, i) => {
    const seen = perTurn.get(tool.name)
    perTurn.set(tool.name, { tokens: (seen?.tokens ?? 0) + tokens[i]!, count: (seen?.count ?? 0) + 1 })
  })
  return { sent, tokens, perTurn, turns: 1 }
}

const fold = (folded: State["folded"], run: Run | undefined): State["folded"] => {
  if (run === undefined) return folded
  const next = new Map(folded)
  for (const [name, one] of run.perTurn) {
    const before = next.get(name)
    next.set(name, { turns: (before?.turns ?? 0) + one.count * run.turns, tokens: (before?.tokens ?? 0) + one.tokens * run.turns })
  }
  return next
}

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
  let calls: Map<string, number> | undefined
  for (const m of incoming) {
    if (m.role !== "assistant") continue
    for (const p of m.parts) {
      if (p.type !== "tool_call") continue
      calls ??= new Map(state.calls)
      calls.set(p.name, (calls.get(p.name) ?? 0) + 1)
    }
  }
  const previous = state.run
  // the run goes on: the same array, each tool's tokens as counted for it (no new array a turn)
  const same = previous !== undefined && previous.sent === sent && sent.every((tool, i) => tokensOf(tool) === previous.tokens[i])
  const next: State = same
    ? { folded: state.folded, run: { ...previous, turns: previous.turns + 1 }, calls: calls ?? state.calls }
    : {
        folded: fold(state.folded, previous),
        run: sent.length === 0 ? undefined : runOf(sent, sent.map(tokensOf)),
        calls: calls ?? state.calls,
      }
  const known = neverCalledOf.get(state)
  // the names sent are the same (the run goes on, or nothing new was sent) and no call came
  if (known !== undefined && calls === undefined && (same || sent.length === 0)) neverCalledOf.set(next, known)
  return next
}

/** One tool's use so far. */
export const use = (state: State, name: string): ToolUse => {
  const folded = state.folded.get(name)
  const run = state.run?.perTurn.get(name)
  const turns = state.run?.turns ?? 0
  return {
    sentTurns: (folded?.turns ?? 0) + (run === undefined ? 0 : run.count * turns),
    sentTokens: (folded?.tokens ?? 0) + (run === undefined ? 0 : run.tokens * turns),
    calls: state.calls.get(name) ?? 0,
  }
}

/** Every tool sent or called, by name. */
export const tools = (state: State): Readonly<Record<string, ToolUse>> => {
  const names = new Set([...state.folded.keys(), ...(state.run?.perTurn.keys() ?? []), ...state.calls.keys()])
  return Object.fromEntries([...names].map((name) => [name, use(state, name)]))
}

/** Names of tools sent at least once and never called, sorted (frozen: the same array while they stay the same). */
export const sentNeverCalled = (state: State): ReadonlyArray<string> => {
  const known = neverCalledOf.get(state)
  if (known !== undefined) return known
  const names = new Set([...state.folded.keys(), ...(state.run?.perTurn.keys() ?? [])])
  const found = Object.freeze([...names].filter((name) => !state.calls.has(name)).sort())
  neverCalledOf.set(state, found)
  return found
}

/** Tokens sent for never-called tools / all tool tokens sent (0 when nothing was sent). */
export const ratio = (state: State): number => {
  let wasted = 0
  let total = 0
  const add = (name: string, tokens: number) => {
    total += tokens
    if (!state.calls.has(name)) wasted += tokens
  }
  for (const [name, folded] of state.folded) add(name, folded.tokens)
  const run = state.run
  if (run !== undefined) for (const [name, one] of run.perTurn) add(name, one.tokens * run.turns)
  return total === 0 ? 0 : wasted / total
}

/** The `report.waste` field. */
export const report = (state: State): Turn.WasteReport => ({ sentNeverCalled: sentNeverCalled(state), ratio: ratio(state) })
