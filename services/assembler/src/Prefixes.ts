/**
 * The parts of a turn request that arrive unchanged turn after turn — the
 * `system` sections and the `tools` — handled once per content instead of
 * once per turn: a bounded cache from their content hash to the value
 * decoded and normalized (the same objects every turn, so the per-object
 * caches downstream — token counts, tool schema compression — answer from
 * memory), and per session the hashes it sent, so a caller may send
 * `{ref: "<hash>"}` instead of the text (issue 18).
 *
 * The hash of a part is the SHA-256 (hex) of its JSON text as
 * `JSON.stringify` writes the parsed value: a client that serializes with
 * `JSON.stringify` computes the same hash from what it sends (the reply's
 * `refs` tells it, too).
 *
 * Per session the part of each kind it sent last is remembered too: a
 * request that resends it as it was (the entry keeps its JSON text) carries
 * that text byte for byte, and `Decode` cuts it out of the request before
 * parsing the rest, rather than parsing and hashing it again.
 *
 * Both maps live in the worker's memory only: a worker that restarts, or
 * takes over a session from another, knows none of its refs, and answers a
 * ref with `BadRequest` (path `system.ref` / `tools.ref`) telling the caller
 * to resend in full, which `ContextClient` does by itself, once.
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import { hash } from "node:crypto"

/** The two request fields handled here. */
export type Kind = "system" | "tools"

/** Both kinds, in request order. */
export const KINDS: ReadonlyArray<Kind> = ["system", "tools"]

/** The defaults: 64 MiB of distinct system and tools JSON kept (each entry holds its UTF-8 and its decoded value). */
export const defaults = {
  bytes: 64 * 1024 * 1024,
} as const

/** A `system` or `tools` value seen before: its hash, as the schema decoded it and as `Normalize` made it. */
export interface Entry {
  readonly kind: Kind
  readonly hash: string
  /** Bytes of its JSON text's UTF-8 (what the cache's byte bound counts). */
  readonly bytes: number
  /** The UTF-8 bytes of its JSON text as `JSON.stringify` writes it (found as they are in a later request, they need not be decoded or parsed again). */
  readonly utf8?: Uint8Array | undefined
  /** The field's value as the request schema decoded it. */
  readonly decoded: unknown
  /** Its neutral form, made once on first use (system sections, or tools in the request's format). */
  normalized?: ReadonlyArray<Conversation.SystemSection> | ReadonlyArray<Conversation.Tool> | undefined
}

const encoder = new TextEncoder()

/** SHA-256 hex of a text. */
export const sha256 = (text: string): string => hash("sha256", text, "hex")

/** A ref: 64 lowercase hex digits. */
export const REF = /^[0-9a-f]{64}$/

/**
 * `{ref: "<hash>"}`: the value names a part sent before, rather than
 * carrying it. The ref, `""` for a `ref` that is not a string, or
 * `undefined` when the value is no ref at all.
 */
export const refOf = (value: unknown): string | undefined => {
  if (typeof value !== "object" || value === null || Array.isArray(value) || !("ref" in value)) return undefined
  const ref = (value as { ref?: unknown }).ref
  return typeof ref === "string" ? ref : ""
}

/**
 * The hash of a part's parsed JSON value, with that JSON, or `undefined` when
 * it cannot be written back (nesting too deep for `JSON.stringify`: the input
 * checks refuse it later).
 */
export const hashOf = (value: unknown): { readonly hash: string; readonly text: string } | undefined => {
  try {
    const text = JSON.stringify(value)
    return text === undefined ? undefined : { hash: sha256(text), text }
  } catch {
    return undefined
  }
}

/** A new entry for a part of `kind` hashed by {@link hashOf}, with its decoded value: its UTF-8 made once, here (a cache hit never needs it). */
export const entryOf = (kind: Kind, hashed: { readonly hash: string; readonly text: string }, decoded: unknown): Entry => {
  // its own buffer (not a slice of Node's shared pool, which a long-lived slice would keep whole)
  const utf8 = encoder.encode(hashed.text)
  return { kind, hash: hashed.hash, bytes: utf8.length, utf8, decoded }
}

/** Whether a request's `system` is a part cached here (a workspace reference is not: it is small, and read from disk). */
export const cacheableSystem = (value: unknown): boolean => (typeof value === "string" ? value !== "" : Array.isArray(value))

/** Whether a request's `tools` is a part cached here. */
export const cacheableTools = (value: unknown): boolean => Array.isArray(value)

/** The cache of one worker. */
export interface Prefixes {
  /** The entry of `kind` with `hash` in `format`, if cached (now the most recently used). */
  readonly get: (format: Turn.Format, kind: Kind, hash: string) => Entry | undefined
  /** Caches an entry (evicting the least recently used ones past the byte bound); a no-op when the bound is 0. */
  readonly put: (format: Turn.Format, entry: Entry) => void
  /** Whether `tenant`/`session` sent the part `kind` with `hash` before. */
  readonly known: (tenant: string, session: string, kind: Kind, hash: string) => boolean
  /** Records that `tenant`/`session` sent these parts in `format` (a successful turn). */
  readonly remember: (tenant: string, session: string, refs: Refs, format: Turn.Format) => void
  /** The part `kind` `tenant`/`session` sent last, and in which format, while cached. */
  readonly last: (tenant: string, session: string, kind: Kind) => { readonly format: Turn.Format; readonly entry: Entry } | undefined
  /** Bytes of JSON cached now. */
  readonly bytes: () => number
  /** Entries cached now. */
  readonly size: () => number
  /** Session refs remembered now. */
  readonly refs: () => number
}

/** The hashes of a turn's parts (the reply's `refs`). */
export interface Refs {
  readonly system?: string | undefined
  readonly tools?: string | undefined
}

/**
 * A cache of at most `bytes` bytes of JSON (0: nothing is cached and every
 * ref is unknown), and at most `sessionRefs` session refs (least recently
 * used forgotten first).
 */
export const make = (options: { readonly bytes: number; readonly sessionRefs: number }): Prefixes => {
  const maxBytes = Math.max(0, Math.floor(options.bytes))
  const maxRefs = Math.max(1, Math.floor(options.sessionRefs))
  const entries = new Map<string, Entry>()
  const sessions = new Map<string, true>()
  // per session and kind, the part it sent last (its format and hash): as many as the session refs
  const lasts = new Map<string, { readonly format: Turn.Format; readonly hash: string }>()
  let used = 0
  const keyOf = (format: Turn.Format, kind: Kind, hash: string) => `${format}\u0000${kind}\u0000${hash}`
  const refKey = (tenant: string, session: string, kind: Kind, hash: string) => `${tenant}\u0000${session}\u0000${kind}\u0000${hash}`

  const get = (format: Turn.Format, kind: Kind, hash: string): Entry | undefined => {
    const key = keyOf(format, kind, hash)
    const entry = entries.get(key)
    if (entry === undefined) return undefined
    entries.delete(key)
    entries.set(key, entry)
    return entry
  }

  const put = (format: Turn.Format, entry: Entry): void => {
    if (entry.bytes > maxBytes) return
    const key = keyOf(format, entry.kind, entry.hash)
    const previous = entries.get(key)
    if (previous !== undefined) {
      entries.delete(key)
      used -= previous.bytes
    }
    entries.set(key, entry)
    used += entry.bytes
    for (const [oldest, old] of entries) {
      if (used <= maxBytes) break
      entries.delete(oldest)
      used -= old.bytes
    }
  }

  /** Sets `key` as the most recently used of `map`, forgetting the least recently used past the session refs' bound. */
  const touch = <V>(map: Map<string, V>, key: string, value: V) => {
    map.delete(key)
    map.set(key, value)
    if (map.size > maxRefs) map.delete(map.keys().next().value!)
  }
  const lastKey = (tenant: string, session: string, kind: Kind) => `${tenant}\u0000${session}\u0000${kind}`

  return {
    get,
    put,
    known: (tenant, session, kind, hash) => sessions.has(refKey(tenant, session, kind, hash)),
    remember: (tenant, session, refs, format) => {
      if (maxBytes === 0) return
      for (const kind of KINDS) {
        const hash = refs[kind]
        if (hash === undefined) continue
        touch(sessions, refKey(tenant, session, kind, hash), true)
        touch(lasts, lastKey(tenant, session, kind), { format, hash })
      }
    },
    last: (tenant, session, kind) => {
      const last = lasts.get(lastKey(tenant, session, kind))
      const entry = last === undefined ? undefined : get(last.format, kind, last.hash)
      return entry === undefined ? undefined : { format: last!.format, entry }
    },
    bytes: () => used,
    size: () => entries.size,
    refs: () => sessions.size,
  }
}
