/**
 * Anthropic cache diagnostics (`diagnostics` of a Messages response, asked for
 * with `diagnostics.previous_message_id`;
 * https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics and
 * the SDK's `Diagnostics` / `CacheMissReason`): `cache_miss_reason` is
 * `model_changed`, `system_changed`, `tools_changed`, `messages_changed`
 * (with `cache_missed_input_tokens`), `previous_message_not_found`,
 * `unavailable`, or `null` while the comparison is still running.
 */
import type * as CacheDiagnostics from "../Diagnosis.ts"

const AT: Readonly<Record<string, CacheDiagnostics.Divergence>> = {
  model_changed: "model",
  system_changed: "system",
  tools_changed: "tools",
  messages_changed: "messages",
}

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined

export const reader: CacheDiagnostics.Reader = {
  matches: (value) => "cache_miss_reason" in value,
  read: (value) => {
    const reason = value["cache_miss_reason"]
    if (reason === null) return { kind: "pending" }
    if (typeof reason !== "object" || Array.isArray(reason) || reason === undefined) return undefined
    const r = reason as Record<string, unknown>
    const type = String(r["type"])
    if (type === "previous_message_not_found") return { kind: "not_found" }
    const at = AT[type]
    if (at === undefined) return { kind: "unavailable" }
    return { kind: "diverged", at, detail: type, missedTokens: count(r["cache_missed_input_tokens"]) }
  },
}
