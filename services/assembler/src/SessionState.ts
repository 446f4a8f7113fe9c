/**
 * What a session carries between turns on the worker that owns it: the
 * stored history (counted in one token family), the tool call ids seen and
 * answered, and what the mechanisms remember so the prompt prefix stays
 * stable (window landmarks, mask grid, proactive rung, summary view,
 * toolsets, waste, loop state).
 *
 * It changes in one place, {@link advance}, by one of three outcomes: rows
 * loaded from the store, the live summary read, or a turn committed. A state
 * is only a speed-up: Postgres is the truth, and the session actor drops the
 * state when a turn fails, so the next turn rehydrates it.
 */
import {
  CachePlanner,
  type Ledger,
  type Masking,
  Normalize,
  type Pipeline,
  SessionLengths,
  type Toolsets,
  Waste,
  type Window,
} from "@ctxd/context"
import type { Conversation, Turn } from "@ctxd/contracts"
import type { View } from "@ctxd/compactor"
import { LoopState } from "@ctxd/loop-detector"

export interface SessionState {
  /** Sequence number of the last stored message (0 for a new session). */
  lastSeq: number
  /** The token family `messages[].tokens` were counted in (see `Gather.familyOf`). */
  readonly family: string
  readonly messages: Array<Pipeline.StoredMessage>
  /** Sum of `messages[].tokens`. */
  tokens: number
  /** Tool call ids made so far, and the ones answered with a result. */
  readonly callIds: Set<string>
  readonly answered: Set<string>
  /** Anchor and pinned positions of `messages`, so the window scans only new messages. */
  landmarks: Window.Landmarks | undefined
  /** The loop detector's folded state over `messages`. */
  loop: LoopState.State
  /**
   * Toolsets loaded so far; `undefined` until first needed, then rebuilt from
   * the history (`Toolsets.replay`): the history is the truth, so it
   * survives a worker change.
   */
  toolsets: Toolsets.State | undefined
  /**
   * The virtual `recall` tool is offered (sticky once true); `undefined`
   * until first needed, then rebuilt from the history (`Recall.replay`).
   */
  recall: boolean | undefined
  /** Tools sent and called (waste detection); rebuilt from the history's calls on load. */
  waste: Waste.State
  /** Masking boundary grid and proactive rung of the previous turn (cache stability). */
  maskGrid: Masking.Grid | undefined
  rung: number | undefined
  /** The live summary (from the compactor's store), once read. */
  summary: View.Summary | undefined
  summaryLoaded: boolean
  /** Last seq when a background compaction was scheduled and not yet seen done. */
  compactionPending: number | undefined
  /** The summarized view of `messages` (its prefix is reused while the summary stays). */
  view: View.View | undefined
  /** Model calls so far (assistant messages stored): the cache planner's guide to how long the session goes on. */
  turns: number
  /**
   * The agent whose length a commit from this state last recorded with the
   * session's then turns (see {@link recordsLength}); undefined until one did.
   */
  lengthAgent: string | undefined
  /** The previous prompt as the cache planner compares prompts, and when it was built (ms). */
  shape: CachePlanner.Candidate | undefined
  /** What the session has saved against its whole history (`Ledger`), kept across views; undefined until a turn ran here. */
  ledger: Ledger.Ledger | undefined
  lastAt: number | undefined
  /** Seconds between this session's recent turns (at most `CachePlanner.MAX_GAPS`): the cache tier's guide. */
  gaps: ReadonlyArray<number>
  /** The knowledge index last sent, and since when a newer one is held back (ms); undefined until a turn ran here. */
  knowledgeIndex: { readonly sent: string; readonly since?: number | undefined } | undefined
  /**
   * The agent's learnings in the session's system section, picked at its
   * first turn here and kept until a new summary (compaction) or the session
   * leaves this worker; undefined until picked.
   */
  learnings: Learnings | undefined
  /**
   * The stored session this state holds when a client-history turn put it
   * there (`ClientTurn`): the session itself (branch 0) or one of its
   * branches; undefined: the session the actor is keyed by.
   */
  stored?: { readonly session: string; readonly branch: number } | undefined
}

/** The learnings section of a session: its text (`""`: none) and what it holds. */
export interface Learnings extends Turn.LearningsReport {
  readonly text: string
}

/** A state for a session with nothing loaded yet. */
export const empty = (family: string): SessionState => ({
  lastSeq: 0,
  family,
  messages: [],
  tokens: 0,
  callIds: new Set(),
  answered: new Set(),
  landmarks: undefined,
  loop: LoopState.initial(),
  toolsets: undefined,
  recall: undefined,
  waste: Waste.empty,
  maskGrid: undefined,
  rung: undefined,
  summary: undefined,
  summaryLoaded: false,
  compactionPending: undefined,
  view: undefined,
  turns: 0,
  lengthAgent: undefined,
  shape: undefined,
  ledger: undefined,
  lastAt: undefined,
  gaps: [],
  knowledgeIndex: undefined,
  learnings: undefined,
})

/** One stored message. */
export type Row = Pipeline.StoredMessage

/** Messages to wait for a scheduled compaction before scheduling again: 40. */
export const PENDING_TURNS = 40

/** What changes a session's state. */
export type Outcome =
  /** Rows read from the store (ascending seq, after `lastSeq`): their loop events and tool calls are folded in. */
  | { readonly _tag: "Loaded"; readonly rows: ReadonlyArray<Row> }
  /** The live summary read from the compactor's store (`undefined`: none). */
  | { readonly _tag: "SummaryRead"; readonly latest: View.Summary | undefined }
  /** A turn committed: its new rows, and what its stages computed over them (already folded). */
  | {
      readonly _tag: "Committed"
      readonly rows: ReadonlyArray<Row>
      readonly loop: LoopState.State
      readonly waste: Waste.State
      readonly toolsets: Toolsets.State
      /** `recall` was offered in this turn's prompt. */
      readonly recall: boolean
      readonly landmarks: Window.Landmarks
      readonly maskGrid: Masking.Grid | undefined
      readonly rung: number | undefined
      readonly view: View.View
      /** A background compaction was scheduled by this turn. */
      readonly scheduled: boolean
      /** The knowledge index sent, and since when a newer one is held back. */
      readonly knowledgeIndex: { readonly sent: string; readonly since?: number | undefined }
      /** The learnings section sent (undefined: none picked). */
      readonly learnings: Learnings | undefined
      /** The prompt sent, as the cache planner compares prompts, and when it was built (ms). */
      readonly shape: CachePlanner.Candidate | undefined
      readonly at: number
      /** The agent whose length the commit recorded (undefined: it recorded none). */
      readonly recorded?: string | undefined
    }

const push = (state: SessionState, rows: ReadonlyArray<Row>): void => {
  for (const row of rows) {
    if (row.message.role === "assistant") state.turns++
    state.messages.push(row)
    state.tokens += row.tokens
    Normalize.recordPairing(state.callIds, state.answered, row.message)
    state.lastSeq = row.seq
  }
}

/**
 * Applies `outcome` to `state` in place (the session actor runs one turn of
 * a session at a time) and returns it.
 */
export const advance = (state: SessionState, outcome: Outcome): SessionState => {
  switch (outcome._tag) {
    case "Loaded": {
      if (outcome.rows.length === 0) return state
      const start = state.messages.length
      push(state, outcome.rows)
      const messages: ReadonlyArray<Conversation.Message> = outcome.rows.map((r) => r.message)
      state.loop = LoopState.observe(state.loop, messages, start)
      state.waste = Waste.record(state.waste, [], messages)
      return state
    }
    case "SummaryRead": {
      state.summaryLoaded = true
      const { latest } = outcome
      if (latest !== undefined && latest.coversToSeq > (state.summary?.coversToSeq ?? 0)) {
        state.summary = latest
        state.compactionPending = undefined
      } else if (state.compactionPending !== undefined && state.lastSeq - state.compactionPending > PENDING_TURNS) {
        // the scheduled compaction never landed: the next decision schedules anew
        state.compactionPending = undefined
      }
      return state
    }
    case "Committed": {
      if (outcome.scheduled) state.compactionPending = state.lastSeq
      push(state, outcome.rows)
      state.loop = outcome.loop
      state.waste = outcome.waste
      state.toolsets = outcome.toolsets
      state.recall = outcome.recall
      state.landmarks = outcome.landmarks
      state.maskGrid = outcome.maskGrid
      state.rung = outcome.rung
      state.view = outcome.view
      state.shape = outcome.shape
      state.ledger = outcome.shape?.ledger ?? state.ledger
      state.knowledgeIndex = outcome.knowledgeIndex
      state.learnings = outcome.learnings
      if (outcome.recorded !== undefined) state.lengthAgent = outcome.recorded
      if (state.lastAt !== undefined) state.gaps = CachePlanner.recordGap(state.gaps, (outcome.at - state.lastAt) / 1000)
      state.lastAt = outcome.at
      return state
    }
  }
}

/**
 * The session's turns once `rows` (a turn's new messages) are stored: what
 * the commit records as its length and what the cache planner measures the
 * history of session lengths against.
 */
export const turnsAfter = (state: SessionState, rows: ReadonlyArray<Row>): number =>
  rows.reduce((turns, row) => (row.message.role === "assistant" ? turns + 1 : turns), state.turns)

/** True when the live summary must be read (never read, or a scheduled compaction may have landed). */
export const needsSummary = (state: SessionState): boolean => !state.summaryLoaded || state.compactionPending !== undefined

/**
 * Whether the commit of a turn that leaves the session at `turns` (see
 * {@link turnsAfter}) records its length for `agent`: when no commit from
 * this state recorded one yet (a session new here, or reloaded), when the
 * agent changed, or when `turns` falls in another bucket of the length
 * histogram than the session's turns before it (`SessionLengths.bucketOf`:
 * every length below 64, then ~9 % wide). The history counts a session by
 * the bucket of its recorded length only, so it reads the same as if every
 * commit recorded, while a session of hundreds of turns writes its length
 * row a few dozen times instead of once a turn.
 */
export const recordsLength = (state: SessionState, agent: string, turns: number): boolean =>
  state.lengthAgent !== agent || SessionLengths.bucketOf(turns) !== SessionLengths.bucketOf(state.turns)

/** The session's tool calls still waiting for a result (a Gemini function response without id answers the open call of its name). */
export const openCalls = (state: SessionState): ReadonlyArray<Normalize.OpenCall> =>
  Normalize.openCalls(
    state.messages.map((r) => r.message),
    state.callIds,
    state.answered,
  )
