/**
 * The mutable state of one fake provider: settings, scripted replies, the
 * request log, prompt caches and id counters.
 */
import { type Caches, clearCaches, makeCaches } from "./cache.ts"
import { applySettings, type ControlPatch, DEFAULT_SETTINGS, type Endpoint, type ScriptedReply, type Settings } from "./settings.ts"
import { prng } from "../../Random.ts"

/** One request as the fake provider received it (mutable while it is being answered). */
export interface LogEntry {
  /** 1-based arrival order since start or the last reset. */
  readonly seq: number
  readonly method: string
  /** Path without the query string, e.g. `/v1/messages`. */
  readonly path: string
  /** The query string with its `?` (`?beta=true`, `?alt=sse`), `""` when none. */
  readonly search: string
  /** The provider endpoint, `undefined` for unknown paths. */
  readonly endpoint: Endpoint | undefined
  /** Request headers (lower-case names; `x-api-key` and `authorization` redacted). */
  readonly headers: Readonly<Record<string, string>>
  /** The last 4 characters of the API key the request carried (keys of 8+ characters): whose key paid for it. */
  readonly keyHint: string | undefined
  /** The parsed JSON body, or the raw text when it is not JSON. */
  readonly body: unknown
  /** Arrival time, epoch milliseconds. */
  readonly timestamp: number
  /** The HTTP status answered; `null` while pending, hung, or when the client gave up first. */
  status: number | null
}

/** One request as the fake provider received it, and the status it was answered with. */
export type LoggedRequest = Readonly<LogEntry>

export interface State {
  settings: Settings
  readonly initial: Settings
  readonly initialReplies: ReadonlyArray<ScriptedReply>
  replies: Array<ScriptedReply>
  log: Array<LogEntry>
  readonly caches: Caches
  readonly seed: number
  random: () => number
  ids: number
  requestIds: number
}

export const make = (patch: ControlPatch, seed: number): State => {
  const initial = applySettings(DEFAULT_SETTINGS, patch)
  const initialReplies = [...(patch.replies ?? [])]
  return {
    settings: initial,
    initial,
    initialReplies,
    replies: [...initialReplies],
    log: [],
    caches: makeCaches(),
    seed,
    random: prng(seed),
    ids: 0,
    requestIds: 0,
  }
}

/** Back to the state right after start: settings, replies, log, caches, counters. */
export const reset = (state: State): void => {
  state.settings = state.initial
  state.replies = [...state.initialReplies]
  state.log = []
  clearCaches(state.caches)
  state.random = prng(state.seed)
  state.ids = 0
  state.requestIds = 0
}

/** Applies a decoded control patch: `reset` first, then the clears, the settings, the new replies. */
export const apply = (state: State, patch: ControlPatch): void => {
  if (patch.reset === true) reset(state)
  if (patch.clearReplies === true) state.replies = []
  if (patch.clearCache === true) clearCaches(state.caches)
  if (patch.clearRequests === true) state.log = []
  state.settings = applySettings(state.settings, patch)
  if (patch.replies !== undefined) state.replies.push(...patch.replies)
}

/**
 * Removes and returns the first queued reply meant for `provider` (or for any
 * provider) whose `whenTool`, if any, is among `tools` (the request's tool names).
 */
export const takeReply = (
  state: State,
  provider: "anthropic" | "openai" | "google",
  tools: ReadonlyArray<string> = [],
): ScriptedReply | undefined => {
  const i = state.replies.findIndex(
    (r) => (r.provider === undefined || r.provider === provider) && (r.whenTool === undefined || tools.includes(r.whenTool)),
  )
  return i < 0 ? undefined : state.replies.splice(i, 1)[0]
}

/** A fresh deterministic id suffix, e.g. `fake_000007`. */
export const nextId = (state: State): string => `fake_${String(++state.ids).padStart(6, "0")}`

/** A fresh request id, e.g. `req_fake_000003`. */
export const nextRequestId = (state: State): string => `req_fake_${String(++state.requestIds).padStart(6, "0")}`

/** A public snapshot of the settings and the reply queue. */
export const snapshot = (state: State): { readonly settings: Settings; readonly pendingReplies: number } => ({
  settings: state.settings,
  pendingReplies: state.replies.length,
})
