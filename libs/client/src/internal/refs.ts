/**
 * Prefix refs: the hash a worker names a session's `system` and `tools` by,
 * a turn's body with `{ref}` in their place while they are unchanged, and
 * the refusal of a worker that does not hold them. Apart from
 * `ContextClient.ts` because it is pure: the client keeps the hashes each
 * session's last reply named and passes them in.
 */
import type { Turn } from "@ctxd/contracts"
import { createHash } from "node:crypto"
import type * as ClientError from "../ClientError.ts"
import type { TurnInput } from "./clientModel.ts"

/** The hash a worker names a `system` or `tools` value by (its reply's `refs`): SHA-256, hex, of its JSON text. */
export const refHash = (value: unknown): string => createHash("sha256").update(JSON.stringify(value)).digest("hex")

/** A `system` or `tools` value a worker caches and names by ref: text or a list (not a workspace reference, not a ref). */
const cacheable = (value: unknown): boolean => (typeof value === "string" && value !== "") || Array.isArray(value)

/** A `BadRequest` naming a ref the worker does not hold. */
export const isUnknownRef = (error: ClientError.ClientError): boolean =>
  error.code === "BadRequest" && (error.path === "system.ref" || error.path === "tools.ref")

/**
 * `input` with `{ref}` for its system and tools where `refs` (the hashes the
 * session's last reply named) names them as they are now; `refs: true` when
 * at least one went by ref.
 */
export const withRefs = (
  input: TurnInput,
  refs: Turn.TurnReply["refs"],
): { readonly body: Readonly<Record<string, unknown>>; readonly refs: boolean } => {
  if (refs === undefined) return { body: input, refs: false }
  const body: Record<string, unknown> = { ...input }
  let sent = false
  for (const kind of ["system", "tools"] as const) {
    const value = input[kind]
    const hash = refs[kind]
    if (hash !== undefined && cacheable(value) && refHash(value) === hash) {
      body[kind] = { ref: hash }
      sent = true
    }
  }
  return { body, refs: sent }
}
