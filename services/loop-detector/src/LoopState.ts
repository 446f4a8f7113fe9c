/**
 * The incremental half of the loop detector: a bounded, config-free state
 * folded over the session's messages one at a time. Each turn folds only the
 * messages it adds (O(new messages)); whatever the history length, the state
 * holds at most {@link EVENT_CAP} completed calls, {@link PENDING_CAP}
 * unanswered calls, {@link MONOLOGUE_CAP} + {@link OVERFLOW_CAP} message
 * indices and a few counters. It is plain JSON data, so it can be persisted
 * next to the session and resumed on another worker.
 *
 * What the fold records:
 * - a completed call (a `tool_call` answered by its `tool_result`) becomes a
 *   {@link CallEvent} keyed by tool name + canonical arguments (+ result);
 *   a result counts as failed when `isError` is set or its text starts like an
 *   error (`Error...`, a traceback, `{"error": ...}`);
 * - user input (a `user` message with text or an image, unless it reports a
 *   context overflow) starts a new episode: the call history is cleared,
 *   because a person in the loop is not an agent spinning on its own;
 * - runs of assistant messages without tool calls (monologue), broken by any
 *   `user` or `tool` message or by a tool call;
 * - messages reporting a context overflow (tool results, user and system
 *   messages whose first 300 characters say so).
 *
 * The detector's own nudges (user messages starting with {@link NUDGE_HEADER}),
 * should they be stored in the history, are skipped: they are not user input.
 */
import type { Conversation } from "@ctxd/contracts"
import { canonicalArgs, canonicalJson, fingerprint } from "./Canonical.ts"
import { MAX_PERIOD } from "./LoopConfig.ts"
import { looksLikeError, mentionsOverflow } from "./internal/classify.ts"
import { HEADER as NUDGE_HEADER } from "./Nudge.ts"

/** Completed calls kept for evidence and cycle checks (32). */
export const EVENT_CAP = 32
/** Calls awaiting their result that are remembered (64); older ones are forgotten. */
export const PENDING_CAP = 64
/** Message indices of the current monologue kept as evidence (32). */
export const MONOLOGUE_CAP = 32
/** Indices of the most recent context-overflow messages kept (16). */
export const OVERFLOW_CAP = 16

const PREVIEW_CHARS = 120
const NON_BLANK = /\S/

/** A tool call together with its result. */
export interface CallEvent {
  readonly name: string
  /** `name(canonical arguments)`, cut to 120 characters, for reports and nudges. */
  readonly preview: string
  /** Fingerprint of the tool name and canonical arguments. */
  readonly call: string
  /** Fingerprint of {@link call}, the failed flag and the result content. */
  readonly key: string
  readonly failed: boolean
  /** Index of the assistant message that made the call. */
  readonly callIndex: number
  /** Index of the message that carried the result. */
  readonly resultIndex: number
}

/** A call whose result has not arrived yet. */
export interface PendingCall {
  readonly id: string
  readonly name: string
  readonly preview: string
  readonly call: string
  readonly index: number
}

export interface State {
  /** Index of the next message to fold (= messages folded so far, when there were no gaps). */
  readonly next: number
  readonly pending: ReadonlyArray<PendingCall>
  /** The last {@link EVENT_CAP} completed calls since the last user input, oldest first. */
  readonly events: ReadonlyArray<CallEvent>
  /**
   * `runs[p - 1]`, for p = 1..{@link MAX_PERIOD}: how many of the latest
   * events in a row have the same key as the event p places before them.
   * p = 1 is "the same call and result again", p = 2 is A-B-A-B, and so on.
   */
  readonly runs: ReadonlyArray<number>
  /** How many of the latest events in a row failed with the same call (0 when the last succeeded). */
  readonly errorRun: number
  /** Assistant messages in a row without a tool call or user/tool input. */
  readonly monologue: number
  /** The last {@link MONOLOGUE_CAP} of those messages' indices. */
  readonly monologueIndices: ReadonlyArray<number>
  /** Indices of the last {@link OVERFLOW_CAP} messages that reported a context overflow. */
  readonly overflows: ReadonlyArray<number>
}

/** The state before any message. */
export const initial = (): State => ({
  next: 0,
  pending: [],
  events: [],
  runs: Array.from({ length: MAX_PERIOD }, () => 0),
  errorRun: 0,
  monologue: 0,
  monologueIndices: [],
  overflows: [],
})

/**
 * Folds messages into the state. `messages[k]` is the session's message at
 * index `startIndex + k` (default: `state.next`, i.e. the chunk continues the
 * history). Messages before `state.next` were folded already and are skipped
 * without being read, so both `observe(s, newMessages, s.next)` and
 * `observe(s, wholeHistory, 0)` cost O(new messages). A chunk starting after
 * `state.next` (a gap) is folded as given, with its own indices.
 * The input state is not modified.
 */
export const observe = (state: State, messages: ReadonlyArray<Conversation.Message>, startIndex: number = state.next): State => {
  const skip = Math.max(0, state.next - startIndex)
  if (skip >= messages.length) return state
  const work: Work = {
    next: state.next,
    pending: [...state.pending],
    events: [...state.events],
    runs: [...state.runs],
    errorRun: state.errorRun,
    monologue: state.monologue,
    monologueIndices: [...state.monologueIndices],
    overflows: [...state.overflows],
  }
  for (let k = skip; k < messages.length; k++) step(work, messages[k]!, startIndex + k)
  work.next = startIndex + messages.length
  return work
}

type Work = { -readonly [K in keyof State]: State[K] extends ReadonlyArray<infer A> ? Array<A> : State[K] }

const step = (work: Work, message: Conversation.Message, index: number): void => {
  const { role } = message
  if (role === "user" && message.parts.some((p) => p.type === "text" && p.text.startsWith(NUDGE_HEADER))) return
  let calls = 0
  let userInput = false
  let overflow = false
  for (const part of message.parts) {
    switch (part.type) {
      case "tool_call":
        if (role === "assistant") {
          calls++
          remember(work, part, index)
        }
        break
      case "tool_result": {
        const text = firstText(part.content)
        overflow ||= mentionsOverflow(text)
        complete(work, part, text, index)
        break
      }
      case "text":
        if (role === "user" && NON_BLANK.test(part.text)) userInput = true
        if (role === "user" || role === "system") overflow ||= mentionsOverflow(part.text)
        break
      case "image":
        if (role === "user") userInput = true
        break
      case "opaque":
        break
    }
  }
  if (role === "assistant") {
    if (calls === 0) {
      work.monologue++
      push(work.monologueIndices, index, MONOLOGUE_CAP)
    } else {
      work.monologue = 0
      work.monologueIndices = []
    }
  } else if (role === "user" || role === "tool") {
    work.monologue = 0
    work.monologueIndices = []
  }
  // A user-role message that reports an overflow is the runtime talking, not a person.
  if (userInput && !overflow) {
    work.events = []
    work.runs = work.runs.map(() => 0)
    work.errorRun = 0
  }
  if (overflow) push(work.overflows, index, OVERFLOW_CAP)
}

const remember = (work: Work, part: Conversation.ToolCallPart, index: number): void => {
  const args = canonicalArgs(part.input, part.arguments)
  const preview = `${part.name}(${args})`
  push(
    work.pending,
    {
      id: part.id,
      name: part.name,
      preview: preview.length > PREVIEW_CHARS ? `${preview.slice(0, PREVIEW_CHARS - 1)}…` : preview,
      call: fingerprint(part.name, args),
      index,
    },
    PENDING_CAP,
  )
}

const complete = (work: Work, part: Conversation.ToolResultPart, text: string, index: number): void => {
  const at = work.pending.findIndex((p) => p.id === part.callId)
  if (at < 0) return // an orphan result, or its call fell out of the pending window
  const call = work.pending[at]!
  work.pending.splice(at, 1)
  const failed = part.isError || looksLikeError(text)
  const event: CallEvent = {
    name: call.name,
    preview: call.preview,
    call: call.call,
    key: fingerprint(call.call, failed ? "failed" : "ok", ...part.content.map(contentPiece)),
    failed,
    callIndex: call.index,
    resultIndex: index,
  }
  const events = work.events
  for (let p = 1; p <= MAX_PERIOD; p++) {
    const before = events[events.length - p]
    work.runs[p - 1] = before !== undefined && before.key === event.key ? work.runs[p - 1]! + 1 : 0
  }
  const last = events[events.length - 1]
  work.errorRun = !failed ? 0 : last !== undefined && last.failed && last.call === event.call ? work.errorRun + 1 : 1
  push(events, event, EVENT_CAP)
}

const contentPiece = (content: Conversation.ToolResultContent): string =>
  content.type === "text" ? `t${content.text}` : `i${canonicalJson(content.source)}`

const firstText = (content: ReadonlyArray<Conversation.ToolResultContent>): string => {
  for (const c of content) if (c.type === "text") return c.text
  return ""
}

const push = <A>(ring: Array<A>, item: A, cap: number): void => {
  ring.push(item)
  if (ring.length > cap) ring.shift()
}
