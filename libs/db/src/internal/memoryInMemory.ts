/** The in-memory {@link MemoryStoreService} (`MemoryStore.layerMemory`). */
import { Effect } from "effect"
import {
  agentOf,
  boundQuery,
  clampLimit,
  defaults,
  type Document,
  type Kind,
  MemoryInvalid,
  type MemoryStoreService,
  newId,
  type Remembered,
  type Scope,
  validate,
  type Version,
  words,
} from "./memoryModel.ts"

const invalid = (path: string, message: string) => new MemoryInvalid({ path, message })

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
  "a an and are as at be but by did do does for from had has have how i in is it of on or our so that the their them then there these they this to was we were what when where which who why will with you your".split(
    " ",
  ),
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
          if (
            existing !== undefined &&
            existing.doc.kind === v.kind &&
            existing.doc.text === v.text &&
            existing.doc.source === v.source &&
            existing.doc.tags.join("\u0000") === v.tags.join("\u0000")
          ) {
            // a retried call: no new version
            return Effect.succeed({ id: existing.doc.id, version: existing.doc.version, created: false })
          }
          const version: Version = { version: (existing?.doc.version ?? 0) + 1, text: v.text, tags: v.tags, source: v.source, at }
          if (existing !== undefined) {
            existing.doc = {
              ...existing.doc,
              kind: v.kind,
              text: v.text,
              tags: v.tags,
              source: v.source,
              updatedAt: at,
              version: version.version,
            }
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
            doc: {
              id,
              kind: v.kind,
              text: v.text,
              tags: v.tags,
              source: v.source,
              user: scope.user,
              createdAt: at,
              updatedAt: at,
              version: 1,
            },
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
          .map(({ row, score }) => ({
            id: row.doc.id,
            text: row.doc.text,
            kind: row.doc.kind,
            tags: row.doc.tags,
            score,
            updatedAt: row.doc.updatedAt,
          }))
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
    any: (scope, kind) =>
      Effect.sync(() => [...rows.values()].some((row) => visible(scope, row) && (kind === undefined || row.doc.kind === kind))),
    forgetUser: (tenant, user) =>
      Effect.sync(() => {
        let removed = 0
        for (const [key, row] of rows) {
          if (row.tenant === tenant && row.user === user) {
            rows.delete(key)
            removed++
          }
        }
        return removed
      }),
  }
}
