/**
 * The session of a request when the server is given no `sessionOf` (the
 * naming rules proper — client session headers, derived sessions, side
 * requests — live in `session/` and are wired by `ctxd gateway`): the
 * tenant from the identity (else `default`), the session from
 * `x-ctxd-session`, else a hash of the model and the first message of the
 * conversation (one session per conversation start; two conversations that
 * open with the same words share it).
 */
import { createHash } from "node:crypto"
import type { SessionInput } from "./Options.ts"
import type { SessionKey } from "./Port.ts"

const TOKEN = /^[A-Za-z0-9_-]{1,128}$/

const header = (input: SessionInput, name: string): string | undefined => {
  const value = input.headers[name]
  const first = Array.isArray(value) ? value[0] : value
  return first !== undefined && TOKEN.test(first.trim()) ? first.trim() : undefined
}

const opening = (input: SessionInput): unknown => {
  const b = input.body
  const list = Array.isArray(b["messages"])
    ? b["messages"]
    : Array.isArray(b["contents"])
      ? b["contents"]
      : Array.isArray(b["input"])
        ? b["input"]
        : [b["input"]]
  return [b["system"] ?? b["instructions"] ?? b["systemInstruction"] ?? null, list[0] ?? null]
}

export const sessionOf = (input: SessionInput): SessionKey => {
  const tenant = input.tenant !== undefined && TOKEN.test(input.tenant) ? input.tenant : "default"
  const named = header(input, "x-ctxd-session")
  if (named !== undefined) return { tenant, session: named, from: "header", side: false }
  const digest = createHash("sha256")
    .update(JSON.stringify([tenant, input.model, opening(input)]))
    .digest("hex")
    .slice(0, 32)
  return { tenant, session: `d-${digest}`, from: "derived", side: false }
}
