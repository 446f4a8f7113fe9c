/**
 * Which headers cross the gateway. A proxy drops the hop-by-hop headers
 * (RFC 9110 §7.6.1: `connection` and every header it names, `keep-alive`,
 * `proxy-*`, `te`, `trailer`, `transfer-encoding`, `upgrade`) and `host`;
 * everything else the client sent — API keys, `anthropic-version`,
 * `anthropic-beta`, `openai-organization`, `x-goog-api-client`,
 * `accept-encoding`, `traceparent` — goes upstream as it came, except
 * ctxd's own `x-ctxd-*` headers (they name sessions and tenants for the
 * gateway, not for the provider).
 *
 * The headers ctxd's body needs (`PromptReply.headers`) are merged in:
 * `anthropic-beta` is a comma-separated list (https://docs.claude.com/en/api/beta-headers),
 * so ctxd's betas are added to the client's; any other header ctxd names is
 * set to ctxd's value.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http"

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
  "host",
  // the gateway already answered the client's 100-continue; upstream gets the whole body at once
  "expect",
])

/** Headers whose value is a comma-separated list that ctxd's values join rather than replace. */
const LISTS = new Set(["anthropic-beta"])

const named = (connection: string | ReadonlyArray<string> | number | undefined): ReadonlySet<string> => {
  if (connection === undefined || typeof connection === "number") return new Set()
  const text = typeof connection === "string" ? connection : connection.join(",")
  return new Set(
    text
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter((t) => t !== ""),
  )
}

const dropped = (name: string, byConnection: ReadonlySet<string>): boolean =>
  HOP_BY_HOP.has(name) || byConnection.has(name) || name.startsWith("x-ctxd-")

/**
 * The headers to send upstream: the client's without hop-by-hop and
 * `x-ctxd-*` ones and without `content-length` (the body may change; the
 * caller sets it), then `identity` (set; `null` removes), then ctxd's.
 */
export const upstream = (
  client: IncomingHttpHeaders,
  identity: Readonly<Record<string, string | null>> | undefined,
  ctxd: Readonly<Record<string, string>> | undefined,
): OutgoingHttpHeaders => {
  const byConnection = named(client["connection"])
  const out: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(client)) {
    if (value === undefined || name === "content-length" || dropped(name, byConnection)) continue
    out[name] = value
  }
  for (const [name, value] of Object.entries(identity ?? {})) {
    const key = name.toLowerCase()
    if (value === null) delete out[key]
    else out[key] = value
  }
  for (const [name, value] of Object.entries(ctxd ?? {})) {
    const key = name.toLowerCase()
    if (dropped(key, byConnection) || key === "content-length") continue
    const current = out[key]
    out[key] = LISTS.has(key) && current !== undefined ? joinList(String(current), value) : value
  }
  return out
}

/** `a` and the items of `b` that `a` lacks, comma-separated. */
export const joinList = (a: string, b: string): string => {
  const items = (text: string) =>
    text
      .split(",")
      .map((t) => t.trim())
      .filter((t) => t !== "")
  const have = items(a)
  const add = items(b).filter((item) => !have.includes(item))
  return [...have, ...add].join(",")
}

/**
 * The response headers to send the client: the provider's without the
 * hop-by-hop ones (the body is relayed byte for byte, so `content-length`
 * and `content-encoding` stay true).
 */
export const downstream = (provider: IncomingHttpHeaders): OutgoingHttpHeaders => {
  const byConnection = named(provider["connection"])
  const out: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(provider)) {
    if (value === undefined || HOP_BY_HOP.has(name) || byConnection.has(name)) continue
    out[name] = value
  }
  return out
}
