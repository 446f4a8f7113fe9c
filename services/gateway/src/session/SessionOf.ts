/**
 * Naming the session of a client request, without client changes
 * (docs/gateway.md, "Sessions"):
 *
 * - the tenant: the one the caller's gateway key maps to; else the
 *   `x-ctxd-tenant` header; else `defaultTenant`. A key's tenant and a
 *   different `x-ctxd-tenant` is refused (a key never reaches another
 *   tenant's sessions);
 * - the session: `x-ctxd-session`; else the client's own session id
 *   (`ClientIds`: `x-claude-code-session-id`, Codex's `thread-id` /
 *   `session-id`, `x-session-id`, `x-session-affinity`, `prompt_cache_key`,
 *   Claude Code's `metadata.user_id`); else derived: `d-` and 32 hex
 *   characters of SHA-256 over the tenant, the system text and the first
 *   user message's text;
 * - side requests (`Side`) get a session of their own,
 *   `<session>-side-<12 hex of their system and first message>`, and
 *   `side: true`, so they never append to the main session.
 *
 * Values that are not subject tokens are cleaned and hashed (`Token`).
 */
import type { Api, SessionKey } from "../Port.ts"
import { clientSession, type Headers, header } from "./ClientIds.ts"
import { shapeOf } from "./Content.ts"
import { sideReason } from "./Side.ts"
import { digest, TOKEN, toToken, withSuffix } from "./Token.ts"

/** The ctxd headers that name a request's session and tenant. */
export const SESSION_HEADER = "x-ctxd-session"
export const TENANT_HEADER = "x-ctxd-tenant"

/** The tenant of requests that name none (no gateway key, no `x-ctxd-tenant`): `default`. */
export const DEFAULT_TENANT = "default"

export interface Input {
  readonly api: Api
  /** The request's headers, names in lower case (as node:http gives them). */
  readonly headers: Headers
  /** The client's body, parsed (not validated). */
  readonly body: Record<string, unknown>
  /** The tenant the caller's gateway key maps to; undefined when it authenticated with none. */
  readonly keyTenant?: string | undefined
  /** The tenant of requests that name none; default {@link DEFAULT_TENANT}. */
  readonly defaultTenant?: string | undefined
}

/** Why a request's session could not be named: its code, the HTTP status to answer, and a message naming the header. */
export interface NamingError {
  readonly code: "BadTenant" | "TenantMismatch" | "BadSession"
  readonly status: 400 | 403
  readonly message: string
}

export type Named = { readonly ok: true; readonly key: SessionKey } | { readonly ok: false; readonly error: NamingError }

const fail = (error: NamingError): Named => ({ ok: false, error })

/** The tenant, or why not. */
const tenantOf = (input: Input): { readonly tenant: string } | NamingError => {
  const named = header(input.headers, TENANT_HEADER)
  if (named !== undefined && !TOKEN.test(named))
    return { code: "BadTenant", status: 400, message: `${TENANT_HEADER} must match [A-Za-z0-9_-]{1,128}` }
  if (input.keyTenant !== undefined) {
    if (named !== undefined && named !== input.keyTenant)
      return { code: "TenantMismatch", status: 403, message: `${TENANT_HEADER} names another tenant than the gateway key's` }
    return { tenant: input.keyTenant }
  }
  return { tenant: named ?? input.defaultTenant ?? DEFAULT_TENANT }
}

/** The session key of a client request, or why it has none. Pure: the same input names the same session. */
export const sessionOf = (input: Input): Named => {
  const tenant = tenantOf(input)
  if ("code" in tenant) return fail(tenant)
  const shape = shapeOf(input.api, input.body)
  const own = header(input.headers, SESSION_HEADER)
  let session: string
  let from: SessionKey["from"]
  let source: string
  if (own !== undefined) {
    const token = toToken(own)
    if (token === undefined) return fail({ code: "BadSession", status: 400, message: `${SESSION_HEADER} must be 1 to 1024 characters` })
    session = token
    from = "header"
    source = SESSION_HEADER
  } else {
    const client = clientSession(input.api, input.headers, input.body)
    const token = client === undefined ? undefined : toToken(client.value)
    if (client !== undefined && token !== undefined) {
      session = token
      from = "client-header"
      source = client.source
    } else {
      session = `d-${digest(`${tenant.tenant}\u0000${shape.system}\u0000${shape.firstUser}`)}`
      from = "derived"
      source = "derived"
    }
  }
  const reason = sideReason(shape, input.headers, from !== "derived")
  if (reason !== undefined) session = withSuffix(session, `side-${digest(`${shape.system}\u0000${shape.firstUser}`, 12)}`)
  return {
    ok: true,
    key: {
      tenant: tenant.tenant,
      session,
      from,
      side: reason !== undefined,
      source,
      ...(reason === undefined ? {} : { sideReason: reason }),
    },
  }
}

/** What the server hands its session function: the request's API, headers and body, and the tenant its authentication found. */
export interface ServerInput {
  readonly api: Api
  readonly headers: Headers
  readonly body: Readonly<Record<string, unknown>>
  /** The tenant the caller's identity names (a gateway key's); undefined: none. */
  readonly tenant?: string | undefined
}

/**
 * {@link sessionOf} as the server's `sessionOf` option: the identity's
 * tenant taken as the gateway key's (an `x-ctxd-tenant` naming another is
 * refused), `defaultTenant` for requests that name none.
 */
export const forServer =
  (options: { readonly defaultTenant?: string | undefined } = {}) =>
  (input: ServerInput): Named =>
    sessionOf({
      api: input.api,
      headers: input.headers,
      body: input.body as Record<string, unknown>,
      keyTenant: input.tenant,
      defaultTenant: options.defaultTenant,
    })
