/**
 * The memory store's model, shared by its implementations: limits, types,
 * the input check and the words a search matches on. Re-exported by
 * `MemoryStore`; import it from there.
 */
import { Memory } from "@ctxd/contracts"
import { Data, Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { DatabaseError, DatabaseUnavailable } from "../Database.ts"

/**
 * The limits: text at most 8,000 characters; at most 16 tags of at most 64
 * characters; a source at most 256 characters; a query at most 1,000
 * characters; a search returns 10 hits unless asked, at most 50; a list page
 * holds 20 documents unless asked, at most 100; a document keeps its 20
 * newest earlier versions; the in-memory store keeps 10,000 documents (the
 * least recently updated go first).
 */
export const defaults = {
  maxTextChars: Memory.limits.textChars,
  maxTags: Memory.limits.tags,
  maxTagChars: Memory.limits.tagChars,
  maxSourceChars: Memory.limits.sourceChars,
  maxQueryChars: Memory.limits.queryChars,
  searchLimit: Memory.limits.searchLimit,
  maxSearchLimit: Memory.limits.maxSearchLimit,
  pageLimit: Memory.limits.pageLimit,
  maxPageLimit: Memory.limits.maxPageLimit,
  maxVersions: Memory.limits.versions,
  memoryDocuments: 10_000,
} as const

/** The agent a scope names when it names none. */
export const DEFAULT_AGENT = Memory.DEFAULT_AGENT

/** What a document is: a fact or preference to remember, or a lesson learned by the agent. */
export type Kind = "memory" | "learning"
export const kinds: ReadonlyArray<Kind> = ["memory", "learning"]

/** Whose documents: the tenant's agent's (default {@link DEFAULT_AGENT}), and optionally one user's. */
export interface Scope {
  readonly tenant: string
  readonly agent?: string | undefined
  readonly user?: string | undefined
}

/** A document as stored. Times are ISO 8601 strings. */
export interface Document {
  readonly id: string
  readonly kind: Kind
  readonly text: string
  readonly tags: ReadonlyArray<string>
  readonly source?: string | undefined
  /** The user it belongs to; absent for the agent's shared documents. */
  readonly user?: string | undefined
  readonly createdAt: string
  readonly updatedAt: string
  /** 1 when created, +1 per edit. */
  readonly version: number
}

/** One search hit, best first. */
export interface Hit {
  readonly id: string
  readonly text: string
  readonly kind: Kind
  readonly tags: ReadonlyArray<string>
  readonly score: number
  readonly updatedAt: string
}

/** One version of a document (its history: the current one first, then earlier ones). */
export interface Version {
  readonly version: number
  readonly text: string
  readonly tags: ReadonlyArray<string>
  readonly source?: string | undefined
  /** When this version was written. */
  readonly at: string
}

/** What `remember` stores. With the `id` of a visible document: an edit of it. */
export interface Remember {
  readonly text: string
  readonly tags?: ReadonlyArray<string> | undefined
  readonly source?: string | undefined
  /** Default `memory`. */
  readonly kind?: Kind | undefined
  /** A document to edit, or the id a new document gets (generated when absent). */
  readonly id?: string | undefined
}

export interface Remembered {
  readonly id: string
  readonly version: number
  /** False when an existing document was edited. */
  readonly created: boolean
}

export interface SearchOptions {
  /** Hits wanted; default {@link defaults}.`searchLimit`, at most `maxSearchLimit`. */
  readonly limit?: number | undefined
  /** Only documents of this kind. */
  readonly kind?: Kind | undefined
}

export interface ListOptions {
  /** The `nextCursor` of the previous page (opaque). */
  readonly cursor?: string | undefined
  /** Documents per page; default {@link defaults}.`pageLimit`, at most `maxPageLimit`. */
  readonly limit?: number | undefined
  readonly kind?: Kind | undefined
}

/** One page of documents, most recently created first. */
export interface Page {
  readonly documents: ReadonlyArray<Document>
  /** Present when there are more: pass it as `cursor`. */
  readonly nextCursor?: string | undefined
}

/** Input the store refuses (too long, too many tags, a malformed id or cursor); nothing was written. */
export class MemoryInvalid extends Data.TaggedError("MemoryInvalid")<{
  readonly message: string
  /** Where in the input, e.g. `text`, `tags.3`. */
  readonly path: string
}> {}

export type Failure = DatabaseUnavailable | DatabaseError | MemoryInvalid

/** The port. */
export interface MemoryStoreService {
  /**
   * Stores a new document, or edits a visible one (`input.id`); an edit that
   * changes nothing (a retry) stores no new version.
   */
  readonly remember: (scope: Scope, input: Remember) => Effect.Effect<Remembered, Failure>
  /** The best `limit` hits for `query`, best first (empty for a query with nothing to match). */
  readonly search: (scope: Scope, query: string, options?: SearchOptions) => Effect.Effect<ReadonlyArray<Hit>, Failure>
  /** One visible document. */
  readonly read: (scope: Scope, id: string) => Effect.Effect<Document | undefined, Failure>
  /** A page of visible documents, most recently created first. */
  readonly list: (scope: Scope, options?: ListOptions) => Effect.Effect<Page, Failure>
  /** A visible document's versions, newest first (the current one first); undefined when there is no such document. */
  readonly history: (scope: Scope, id: string) => Effect.Effect<ReadonlyArray<Version> | undefined, Failure>
  /** Removes a visible document and its history; true when there was one. */
  readonly forget: (scope: Scope, id: string) => Effect.Effect<boolean, Failure>
  /** Whether the scope sees any document (of `kind`, when given). Cheap: one index probe. */
  readonly any: (scope: Scope, kind?: Kind) => Effect.Effect<boolean, Failure>
  /**
   * Removes every document stored under `user` in `tenant`, of every agent,
   * with its history (the agents' shared documents stay): the memory part of
   * deleting a user's data. Returns how many documents were removed.
   */
  readonly forgetUser: (tenant: string, user: string) => Effect.Effect<number, Failure>
}

// ---------------------------------------------------------------------------
// Validation shared by both implementations (the endpoint's Schema checks the
// same limits first; these guard in-process callers).

const ID = /^[A-Za-z0-9_.:-]{1,128}$/

/** True for an id a document may have. */
export const isId = (id: string): boolean => ID.test(id)

/** A fresh document id. */
export const newId = (): string => `m-${randomUUID()}`

// NUL and lone surrogates cannot be stored by Postgres text / jsonb faithfully
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

const invalid = (path: string, message: string) => new MemoryInvalid({ path, message })

/** The input with tags trimmed and de-duplicated, or why it is refused. */
export const validate = (
  input: Remember,
): Effect.Effect<Remember & { readonly tags: ReadonlyArray<string>; readonly kind: Kind }, MemoryInvalid> =>
  Effect.suspend(() => {
    if (input.text.trim().length === 0) return Effect.fail(invalid("text", "text is empty"))
    if (input.text.length > defaults.maxTextChars) {
      return Effect.fail(invalid("text", `text has ${input.text.length} characters; at most ${defaults.maxTextChars}`))
    }
    if (UNSTORABLE.test(input.text)) return Effect.fail(invalid("text", "text holds a NUL character or a lone surrogate"))
    const raw = input.tags ?? []
    if (raw.length > defaults.maxTags) return Effect.fail(invalid("tags", `${raw.length} tags; at most ${defaults.maxTags}`))
    const tags: Array<string> = []
    for (let i = 0; i < raw.length; i++) {
      const tag = raw[i]!.trim()
      if (tag.length === 0 || tag.length > defaults.maxTagChars || UNSTORABLE.test(tag)) {
        return Effect.fail(invalid(`tags.${i}`, `a tag has 1 to ${defaults.maxTagChars} characters`))
      }
      if (!tags.includes(tag)) tags.push(tag)
    }
    if (input.source !== undefined && (input.source.length > defaults.maxSourceChars || UNSTORABLE.test(input.source))) {
      return Effect.fail(invalid("source", `a source has at most ${defaults.maxSourceChars} characters`))
    }
    if (input.id !== undefined && !isId(input.id)) return Effect.fail(invalid("id", "id must match [A-Za-z0-9_.:-]{1,128}"))
    const kind = input.kind ?? "memory"
    if (!kinds.includes(kind)) return Effect.fail(invalid("kind", "kind is memory or learning"))
    return Effect.succeed({ ...input, tags, kind })
  })

/** The limit to use: `wanted` clamped to 1..`max`, `fallback` when absent. */
export const clampLimit = (wanted: number | undefined, fallback: number, max: number): number =>
  wanted === undefined || !Number.isFinite(wanted) ? fallback : Math.min(max, Math.max(1, Math.floor(wanted)))

/** The query cut to {@link defaults}.`maxQueryChars`. */
export const boundQuery = (query: string): string => query.slice(0, defaults.maxQueryChars)

/** The words of `text` a search matches on: lower-case runs of letters and digits (at most 32). */
export const words = (text: string): ReadonlyArray<string> => (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).slice(0, 32)

/** The scope's agent (default {@link DEFAULT_AGENT}). */
export const agentOf = (scope: Scope) => scope.agent ?? DEFAULT_AGENT
