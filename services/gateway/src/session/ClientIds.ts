/**
 * The session ids agent clients already send, in the order they are
 * trusted. The more specific one wins: a conversation (thread) id before a
 * process-wide session id, a header before a body field.
 *
 * - Claude Code: `X-Claude-Code-Session-Id`, one UUID per process, on every
 *   API request (https://code.claude.com/docs/en/llm-gateway-protocol,
 *   "Request headers"); its sub-agents and side calls share it. Older
 *   releases put it in the body only: `metadata.user_id` as
 *   `user_<hash>_account_<uuid>_session_<uuid>`, newer ones a JSON text
 *   with a `session_id` key.
 * - Codex CLI: `session-id` and `thread-id` on every `/responses` call
 *   (releases before 2026 sent `session_id`, and `conversation_id`, a
 *   copy of it), and `prompt_cache_key` = the conversation id in the body
 *   (openai/codex pull requests 1614, 9107, 14312).
 * - Generic proxies and SDK hooks: `x-session-id`, `x-session-affinity`
 *   (sticky-routing headers of LLM routers).
 * - OpenAI `prompt_cache_key` (Chat Completions and Responses): callers set
 *   it per conversation to keep its prefix on one cache
 *   (https://platform.openai.com/docs/guides/prompt-caching).
 */
import type { Api } from "../Port.ts"

/** A header's value, as node:http gives it (lower-case names). */
export type Headers = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** One client session id found. */
export interface Found {
  /** Where it was read: a header name (lower case) or `body.<field>`. */
  readonly source: string
  readonly value: string
}

/** The client session headers, most specific first. */
export const HEADERS: ReadonlyArray<string> = [
  "x-claude-code-session-id",
  "thread-id",
  "session-id",
  "session_id",
  "conversation_id",
  "x-session-id",
  "x-session-affinity",
]

/** A header's single value (the first of a repeated one), trimmed; undefined when absent or empty. */
export const header = (headers: Headers, name: string): string | undefined => {
  const raw = headers[name]
  const value = typeof raw === "string" ? raw : raw?.[0]
  const trimmed = value?.trim()
  return trimmed === undefined || trimmed.length === 0 ? undefined : trimmed
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** Claude Code's session in `metadata.user_id`: `…_session_<id>` or a JSON text `{"session_id": …}`. */
const fromUserId = (userId: string): string | undefined => {
  if (userId.startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(userId)
      const id = isObject(parsed) ? parsed["session_id"] : undefined
      return typeof id === "string" && id.length > 0 ? id : undefined
    } catch {
      return undefined
    }
  }
  const at = userId.lastIndexOf("_session_")
  const id = at < 0 ? "" : userId.slice(at + "_session_".length)
  return id.length > 0 ? id : undefined
}

/** The APIs whose bodies may carry `prompt_cache_key`. */
const CACHE_KEY_APIS: ReadonlySet<Api> = new Set<Api>(["openai-chat", "openai-responses"])

/** The body fields that name a session, for `api`. */
const fromBody = (api: Api, body: Record<string, unknown>): Found | undefined => {
  if (CACHE_KEY_APIS.has(api)) {
    const key = body["prompt_cache_key"]
    if (typeof key === "string" && key.trim().length > 0) return { source: "body.prompt_cache_key", value: key.trim() }
  }
  if (api === "anthropic-messages" && isObject(body["metadata"])) {
    const userId = body["metadata"]["user_id"]
    const id = typeof userId === "string" ? fromUserId(userId) : undefined
    if (id !== undefined) return { source: "body.metadata.user_id", value: id }
  }
  return undefined
}

/** The client's own session id for a request, the first of {@link HEADERS} then the body's fields; undefined when it sends none. */
export const clientSession = (api: Api, headers: Headers, body: Record<string, unknown>): Found | undefined => {
  for (const name of HEADERS) {
    const value = header(headers, name)
    if (value !== undefined) return { source: name, value }
  }
  return fromBody(api, body)
}
