/**
 * What the gateway needs from the worker fleet, whichever way it reaches
 * it (NATS in front of a fleet, or turns run in this process): the prompt
 * for one client request, and the usage the provider billed for it.
 */
import type { Turn } from "@ctxd/contracts"

/** The provider APIs the gateway speaks. */
export type Api = "anthropic-messages" | "openai-chat" | "openai-responses" | "gemini"

/** Who and which session a client request belongs to (see `session/`). */
export interface SessionKey {
  readonly tenant: string
  readonly session: string
  /** How the session was named: a ctxd header, a client's own session header, or derived. */
  readonly from: "header" | "client-header" | "derived"
  /** A side request (a title or summary call next to the main loop): not a turn of the session. */
  readonly side: boolean
  /** Where the session was read: `x-ctxd-session`, the client's header (lower case) or body field (`body.prompt_cache_key`), or `derived`. */
  readonly source?: string | undefined
  /** Why the request is side (`session/Side.ts`): `header`, `subagent`, `structured`, `single-toolless`. */
  readonly sideReason?: string | undefined
}

/** One client request, parsed: its API, the body as the client sent it, the session. */
export interface PromptRequest {
  readonly api: Api
  /** Whether the client asked for a streamed response (`stream: true`, Gemini `streamGenerateContent`). */
  readonly stream?: boolean | undefined
  readonly body: Record<string, unknown>
  readonly key: SessionKey
  /** The model named by the path (Gemini) or the body. */
  readonly model: string
  /** The agent (the mode resolver's second key), sent as the turn's `options.agent`; absent: the tenant's default. */
  readonly agent?: string | undefined
  /** The request's mode; `shadow`: the reply is recorded, not sent, and the usage is the client's body's. Default `active`. */
  readonly mode?: "active" | "shadow" | undefined
}

/** ctxd's answer: the body to send upstream instead of the client's, and headers it requires (e.g. a beta). */
export interface PromptReply {
  readonly body: Record<string, unknown>
  readonly headers: Readonly<Record<string, string>>
  readonly turnId: string
  readonly report: Turn.Report
}

/** The usage read from the provider's response (streamed or not), as the provider's own usage object. */
export interface UsageReport {
  readonly key: SessionKey
  readonly turnId: string
  readonly api: Api
  readonly model: string
  readonly usage: Record<string, unknown>
  /** The provider's response id (`msg_…`, `resp_…`, `chatcmpl-…`), when it sent one. */
  readonly responseId?: string | undefined
  /** The mode of the request the usage is for; `shadow`: billed for the client's body, not ctxd's. Default `active`. */
  readonly mode?: "active" | "shadow" | undefined
}

export interface TurnPort {
  /** The prompt for `request`; fails (rejects) when ctxd cannot answer in time. */
  readonly prompt: (request: PromptRequest, signal: AbortSignal) => Promise<PromptReply>
  /** Records the turn's usage; fire and forget (errors are logged by the port, never thrown). */
  readonly usage: (report: UsageReport) => void
  /** Whether the fleet can answer now (readiness). */
  readonly ready: () => Promise<boolean>
  readonly close: () => Promise<void>
}
