/**
 * The neutral form of a provider's cache diagnostics (types only, no imports:
 * the adapters' readers and `CacheDiagnostics` both use it without a cycle).
 */

/** Where a prompt diverged, in the providers' words mapped to one set. */
export type Divergence = "model" | "system" | "tools" | "messages" | "other"

/** What a provider's diagnostics said. */
export type Diagnosis =
  /** The prompt diverged from the compared one here; `missedTokens` when the provider estimates it. */
  | { readonly kind: "diverged"; readonly at: Divergence; readonly detail: string; readonly missedTokens?: number | undefined }
  /** No divergence: the structure matched (a miss then is expiry, eviction or routing: not told apart). */
  | { readonly kind: "unchanged" }
  /** The compared response was not found, the provider could not tell, or had not finished comparing. */
  | { readonly kind: "not_found" | "unavailable" | "pending" }

/** One provider's reader: whether a value is in its shape, and reading it (undefined: nothing to read). */
export interface Reader {
  readonly matches: (value: Readonly<Record<string, unknown>>) => boolean
  readonly read: (value: Readonly<Record<string, unknown>>) => Diagnosis | undefined
}
