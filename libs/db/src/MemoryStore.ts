/**
 * Memory documents per tenant, agent and (optionally) user: what the
 * `<root>.v1.memory.<tenant>` endpoint edits and searches, what ctxd's
 * virtual `memory_*` tools answer from, and where learnings (kind
 * `learning`) live.
 *
 * **Scope.** A document belongs to `(tenant, agent, user?)`. A scope without a
 * user sees the agent's shared documents (those stored without a user); a
 * scope with a user sees that user's documents *and* the agent's shared ones.
 * Every operation (search, read, list, history, forget, an update through
 * `remember` with an `id`) acts on what the scope sees; a new document is
 * stored under the scope's user (shared when it has none). Every query names
 * the tenant and the agent.
 *
 * **Edits.** `remember` with the `id` of a visible document replaces its
 * text, tags and source and keeps the previous version in its history (the
 * newest {@link defaults}.`maxVersions`); `forget` removes the document and
 * its history.
 *
 * **Search** ranks by text relevance (Postgres: `ts_rank_cd` over an English
 * `tsvector`, any query word may match; `pg_trgm` word similarity for short
 * queries and typos when nothing else matched enough), newest first on ties.
 * Scores are in `[0, 1)`; higher is better; they compare hits of one search,
 * not hits of different searches.
 *
 * A port: {@link layer} (Postgres) and {@link layerMemory} (tests, in-process;
 * bounded, simpler scoring).
 */
import { Context, Data, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { Database, DatabaseError, DatabaseUnavailable } from "./Database.ts"
import { make as makePostgres, type PostgresOptions } from "./internal/memoryPostgres.ts"

/**
 * The limits: text at most 8,000 characters; at most 16 tags of at most 64
 * characters; a source at most 256 characters; a query at most 1,000
 * characters; a search returns 10 hits unless asked, at most 50; a list page
 * holds 20 documents unless asked, at most 100; a document keeps its 20
 * newest earlier versions; the in-memory store keeps 10,000 documents (the
 * least recently updated go first).
 */
export const defaults = {
  maxTextChars: 8_000,
  maxTags: 16,
  maxTagChars: 64,
  maxSourceChars: 256,
  maxQueryChars: 1_000,
  searchLimit: 10,
  maxSearchLimit: 50,
  pageLimit: 20,
  maxPageLimit: 100,
  maxVersions: 20,
  memoryDocuments: 10_000,
} as const

/** The agent a scope names when it names none. */
export const DEFAULT_AGENT = "default"

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
  /** Stores a new document, or edits a visible one (`input.id`). */
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
}

export class MemoryStore extends Context.Tag("@ctxd/db/MemoryStore")<MemoryStore, MemoryStoreService>() {}

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
export const validate = (input: Remember): Effect.Effect<Remember & { readonly tags: ReadonlyArray<string>; readonly kind: Kind }, MemoryInvalid> =>
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
export const words = (text: string): ReadonlyArray<string> =>
  (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).slice(0, 32)

const agentOf = (scope: Scope) => scope.agent ?? DEFAULT_AGENT

// ---------------------------------------------------------------------------
// In memory

interface Row {
  readonly tenant: string
  readonly agent: string
  readonly user: string | undefined
  readonly seq: number
  doc: Document
  versions: Array<Version>
  words: ReadonlySet<string>
}

const trigrams = (word: string): Set<string> => {
  const padded = `  ${word} `
  const out = new Set<string>()
  for (let i = 0; i + 3 <= padded.length; i++) out.add(padded.slice(i, i + 3))
  return out
}

const similarity = (a: string, b: string): number => {
  const ta = trigrams(a)
  const tb = trigrams(b)
  let shared = 0
  for (const t of ta) if (tb.has(t)) shared++
  return shared / (ta.size + tb.size - shared)
}

/**
 * The in-memory score: the share of the query's words the document has
 * (a word matches a document word it equals or is a prefix of, 4 letters or
 * more), scaled into `[0, 1)`; when no word matches, half the best trigram
 * similarity (≥ 0.5) of a query word to a document word (typos).
 */
// a few English function words a query is full of (Postgres's english configuration drops these and more)
const STOP = new Set(
  "a an and are as at be but by did do does for from had has have how i in is it of on or our so that the their them then there these they this to was we were what when where which who why will with you your".split(" "),
)

const scoreOf = (query: ReadonlyArray<string>, row: Row): number => {
  if (query.length === 0) return 0
  let matched = 0
  for (const q of query) {
    if (row.words.has(q)) matched++
    else if (q.length >= 4 && [...row.words].some((w) => w.startsWith(q) || (w.length >= 4 && q.startsWith(w)))) matched += 0.8
  }
  if (matched > 0) return (matched / query.length) * 0.9
  let best = 0
  for (const q of query) {
    if (q.length < 3) continue
    for (const w of row.words) best = Math.max(best, similarity(q, w))
  }
  return best >= 0.5 ? best * 0.5 : 0
}

/** An in-memory store (a fresh one per call): bounded to `maxDocuments` (default {@link defaults}.`memoryDocuments`). */
export const makeMemory = (options: { readonly maxDocuments?: number | undefined; readonly now?: () => Date } = {}): MemoryStoreService => {
  const max = Math.max(1, Math.floor(options.maxDocuments ?? defaults.memoryDocuments))
  const now = options.now ?? (() => new Date())
  // key: tenant \0 agent \0 id; Map order = least recently updated first
  const rows = new Map<string, Row>()
  let seq = 0
  const keyOf = (tenant: string, agent: string, id: string) => `${tenant}\u0000${agent}\u0000${id}`
  const visible = (scope: Scope, row: Row) =>
    row.tenant === scope.tenant && row.agent === agentOf(scope) && (row.user === undefined || row.user === scope.user)
  const find = (scope: Scope, id: string): Row | undefined => {
    const row = rows.get(keyOf(scope.tenant, agentOf(scope), id))
    return row !== undefined && visible(scope, row) ? row : undefined
  }
  const seen = (scope: Scope, kind: Kind | undefined) =>
    [...rows.values()].filter((row) => visible(scope, row) && (kind === undefined || row.doc.kind === kind))

  return {
    remember: (scope, input) =>
      Effect.flatMap(validate(input), (v) =>
        Effect.suspend((): Effect.Effect<Remembered, MemoryInvalid> => {
          const at = now().toISOString()
          const agent = agentOf(scope)
          const existing = v.id === undefined ? undefined : rows.get(keyOf(scope.tenant, agent, v.id))
          if (existing !== undefined && !visible(scope, existing)) {
            return Effect.fail(invalid("id", "that id belongs to another user's document"))
          }
          const version: Version = { version: (existing?.doc.version ?? 0) + 1, text: v.text, tags: v.tags, source: v.source, at }
          if (existing !== undefined) {
            existing.doc = { ...existing.doc, kind: v.kind, text: v.text, tags: v.tags, source: v.source, updatedAt: at, version: version.version }
            existing.versions = [version, ...existing.versions].slice(0, defaults.maxVersions + 1)
            existing.words = new Set(words(`${v.text} ${v.tags.join(" ")}`))
            const key = keyOf(scope.tenant, agent, existing.doc.id)
            rows.delete(key)
            rows.set(key, existing)
            return Effect.succeed({ id: existing.doc.id, version: version.version, created: false })
          }
          const id = v.id ?? newId()
          rows.set(keyOf(scope.tenant, agent, id), {
            tenant: scope.tenant,
            agent,
            user: scope.user,
            seq: ++seq,
            doc: { id, kind: v.kind, text: v.text, tags: v.tags, source: v.source, user: scope.user, createdAt: at, updatedAt: at, version: 1 },
            versions: [version],
            words: new Set(words(`${v.text} ${v.tags.join(" ")}`)),
          })
          if (rows.size > max) rows.delete(rows.keys().next().value!)
          return Effect.succeed({ id, version: 1, created: true })
        }),
      ),
    search: (scope, query, options = {}) =>
      Effect.sync(() => {
        const q = [...new Set(words(boundQuery(query)))].filter((w) => !STOP.has(w))
        const limit = clampLimit(options.limit, defaults.searchLimit, defaults.maxSearchLimit)
        return seen(scope, options.kind)
          .map((row) => ({ row, score: scoreOf(q, row) }))
          .filter((s) => s.score > 0)
          .sort((a, b) => b.score - a.score || b.row.doc.updatedAt.localeCompare(a.row.doc.updatedAt) || b.row.seq - a.row.seq)
          .slice(0, limit)
          .map(({ row, score }) => ({ id: row.doc.id, text: row.doc.text, kind: row.doc.kind, tags: row.doc.tags, score, updatedAt: row.doc.updatedAt }))
      }),
    read: (scope, id) => Effect.sync(() => find(scope, id)?.doc),
    list: (scope, options = {}) =>
      Effect.suspend(() => {
        const limit = clampLimit(options.limit, defaults.pageLimit, defaults.maxPageLimit)
        const after = options.cursor === undefined ? Number.POSITIVE_INFINITY : Number(options.cursor)
        if (options.cursor !== undefined && !/^\d{1,15}$/.test(options.cursor)) {
          return Effect.fail(invalid("cursor", "not a cursor this store returned"))
        }
        const page = seen(scope, options.kind)
          .filter((row) => row.seq < after)
          .sort((a, b) => b.seq - a.seq)
          .slice(0, limit + 1)
        const documents = page.slice(0, limit)
        return Effect.succeed({
          documents: documents.map((row) => row.doc),
          ...(page.length > limit ? { nextCursor: String(documents[documents.length - 1]!.seq) } : {}),
        })
      }),
    history: (scope, id) => Effect.sync(() => find(scope, id)?.versions),
    forget: (scope, id) =>
      Effect.sync(() => {
        const row = find(scope, id)
        if (row === undefined) return false
        rows.delete(keyOf(row.tenant, row.agent, id))
        return true
      }),
    any: (scope, kind) => Effect.sync(() => [...rows.values()].some((row) => visible(scope, row) && (kind === undefined || row.doc.kind === kind))),
  }
}

/** {@link makeMemory} as a layer (a fresh store per build). */
export const layerMemory = (options: { readonly maxDocuments?: number | undefined } = {}): Layer.Layer<MemoryStore> =>
  Layer.sync(MemoryStore, () => makeMemory(options))

// ---------------------------------------------------------------------------
// Postgres

/** Options of the Postgres store. */
export type Options = PostgresOptions

/**
 * The Postgres store (migration 8); needs a migrated {@link Database}. Looks
 * up pg_trgm once when built (fuzzy matching is off without it, logged).
 */
export const make = (options: Options = {}): Effect.Effect<MemoryStoreService, never, Database> => makePostgres(options)

/** {@link make} as a layer. */
export const layer: Layer.Layer<MemoryStore, never, Database> = Layer.effect(MemoryStore, make())

/** {@link make} with options, as a layer. */
export const layerWith = (options: Options): Layer.Layer<MemoryStore, never, Database> => Layer.effect(MemoryStore, make(options))
