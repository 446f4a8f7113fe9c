/**
 * The Postgres {@link MemoryStoreService} (tables of migration 8). Every
 * statement names the tenant and the agent; visibility is `owner IN ('', user)`.
 */
import { Effect } from "effect"
import { Database, type Queryable } from "../Database.ts"
import {
  boundQuery,
  clampLimit,
  DEFAULT_AGENT,
  defaults,
  type Document,
  type Hit,
  type Kind,
  MemoryInvalid,
  type MemoryStoreService,
  newId,
  type Scope,
  type Version,
  validate,
  words,
} from "../MemoryStore.ts"
import { logFailure } from "./logFailure.ts"

interface DocRow {
  readonly id: string
  readonly owner: string
  readonly seq: string
  readonly kind: Kind
  readonly body: string
  readonly tags: ReadonlyArray<string>
  readonly source: string | null
  readonly version: number
  readonly created_at: Date
  readonly updated_at: Date
}

const COLUMNS = "id, owner, seq, kind, body, tags, source, version, created_at, updated_at"
const VISIBLE = "tenant = $1 AND agent = $2 AND owner IN ('', $3)"

const toDocument = (r: DocRow): Document => ({
  id: r.id,
  kind: r.kind,
  text: r.body,
  tags: r.tags,
  ...(r.source === null ? {} : { source: r.source }),
  ...(r.owner === "" ? {} : { user: r.owner }),
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  version: r.version,
})

const keyOf = (scope: Scope) => [scope.tenant, scope.agent ?? DEFAULT_AGENT, scope.user ?? ""] as const

/** Text hits score in [0.25, 1), fuzzy (trigram) hits in [0, 0.25): text relevance first. */
const TEXT_FLOOR = 0.25

/** The schema holding pg_trgm, when it is installed in this database. */
const trigramSchema = (db: Queryable) =>
  db
    .query<{ nspname: string }>(
      "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'",
    )
    .pipe(Effect.map(({ rows }) => rows[0]?.nspname))

/** Identifiers we interpolate must be plain (an extension schema is, but check). */
const plainIdentifier = (name: string | undefined) => (name !== undefined && /^[a-z_][a-z0-9_]*$/.test(name) ? name : undefined)

export interface PostgresOptions {
  /** Use pg_trgm for fuzzy matches when installed; default true. */
  readonly fuzzy?: boolean | undefined
  /** Fuzzy matching runs for queries of at most this many words; default 3. */
  readonly fuzzyMaxWords?: number | undefined
}

export const make = (options: PostgresOptions = {}): Effect.Effect<MemoryStoreService, never, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    const trgm =
      options.fuzzy === false
        ? undefined
        : plainIdentifier(
            yield* trigramSchema(db).pipe(
              Effect.catchAll((e) => Effect.as(Effect.logWarning(`memory store: could not look up pg_trgm: ${e.message}`), undefined)),
            ),
          )
    if (options.fuzzy !== false && trgm === undefined) {
      yield* Effect.logWarning("memory store: pg_trgm is not installed; search runs without fuzzy matching")
    }
    const fuzzyMaxWords = Math.max(0, Math.floor(options.fuzzyMaxWords ?? 3))

    const TEXT_SEARCH = `
      SELECT id, body, kind, tags, updated_at, ts_rank_cd(tsv, q, 1|32) AS rank
      FROM ctxd_memory, to_tsquery('english'::regconfig, $4) q
      WHERE ${VISIBLE} AND ($5::text IS NULL OR kind = $5) AND tsv @@ q
      ORDER BY rank DESC, updated_at DESC, id
      LIMIT $6`
    const FUZZY_SEARCH =
      trgm === undefined
        ? undefined
        : `SELECT id, body, kind, tags, updated_at, ${trgm}.word_similarity($4, body) AS rank
           FROM ctxd_memory
           WHERE ${VISIBLE} AND ($5::text IS NULL OR kind = $5) AND $4 OPERATOR(${trgm}.<%) body AND NOT (id = ANY($7::text[]))
           ORDER BY rank DESC, updated_at DESC, id
           LIMIT $6`

    type HitRow = { id: string; body: string; kind: Kind; tags: ReadonlyArray<string>; updated_at: Date; rank: number }
    const toHit = (floor: number, span: number) => (r: HitRow): Hit => ({
      id: r.id,
      text: r.body,
      kind: r.kind,
      tags: r.tags,
      score: floor + span * Math.min(0.999_999, Math.max(0, Number(r.rank))),
      updatedAt: r.updated_at.toISOString(),
    })

    const search: MemoryStoreService["search"] = (scope, query, opts = {}) =>
      Effect.gen(function* () {
        const limit = clampLimit(opts.limit, defaults.searchLimit, defaults.maxSearchLimit)
        const terms = [...new Set(words(boundQuery(query)))]
        if (terms.length === 0) return []
        const kind = opts.kind ?? null
        // any word may match (OR); ts_rank_cd rewards documents with more of them, close together
        const text = yield* db.query<HitRow>(TEXT_SEARCH, [...keyOf(scope), terms.join(" | "), kind, limit])
        const hits = text.rows.map(toHit(TEXT_FLOOR, 1 - TEXT_FLOOR))
        if (FUZZY_SEARCH === undefined || hits.length >= limit || terms.length > fuzzyMaxWords) return hits
        const fuzzy = yield* db.query<HitRow>(FUZZY_SEARCH, [...keyOf(scope), terms.join(" "), kind, limit - hits.length, hits.map((h) => h.id)])
        return [...hits, ...fuzzy.rows.map(toHit(0, TEXT_FLOOR))]
      }).pipe(logFailure("memory store: search"), Effect.withSpan("MemoryStore.search"))

    const remember: MemoryStoreService["remember"] = (scope, input) =>
      Effect.flatMap(validate(input), (v) =>
        db.transaction((tx) =>
          Effect.gen(function* () {
            const [tenant, agent, user] = keyOf(scope)
            const existing =
              v.id === undefined
                ? undefined
                : (yield* tx.query<{ owner: string; version: number }>(
                    "SELECT owner, version FROM ctxd_memory WHERE tenant = $1 AND agent = $2 AND id = $3 FOR UPDATE",
                    [tenant, agent, v.id],
                  )).rows[0]
            if (existing !== undefined && existing.owner !== "" && existing.owner !== user) {
              return yield* new MemoryInvalid({ path: "id", message: "that id belongs to another user's document" })
            }
            const id = v.id ?? newId()
            const version = (existing?.version ?? 0) + 1
            if (existing === undefined) {
              yield* tx.query(
                `INSERT INTO ctxd_memory (tenant, agent, id, owner, kind, body, tags, source) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
                [tenant, agent, id, user, v.kind, v.text, v.tags, v.source ?? null],
              )
            } else {
              yield* tx.query(
                `UPDATE ctxd_memory SET kind = $4, body = $5, tags = $6, source = $7, version = $8, updated_at = now()
                 WHERE tenant = $1 AND agent = $2 AND id = $3`,
                [tenant, agent, id, v.kind, v.text, v.tags, v.source ?? null, version],
              )
              yield* tx.query("DELETE FROM ctxd_memory_versions WHERE tenant = $1 AND agent = $2 AND id = $3 AND version <= $4", [
                tenant,
                agent,
                id,
                version - defaults.maxVersions - 1,
              ])
            }
            yield* tx.query(
              "INSERT INTO ctxd_memory_versions (tenant, agent, id, version, body, tags, source) VALUES ($1, $2, $3, $4, $5, $6, $7)",
              [tenant, agent, id, version, v.text, v.tags, v.source ?? null],
            )
            return { id, version, created: existing === undefined }
          }),
        ),
      ).pipe(logFailure("memory store: remember"), Effect.withSpan("MemoryStore.remember"))

    const read: MemoryStoreService["read"] = (scope, id) =>
      db
        .query<DocRow>(`SELECT ${COLUMNS} FROM ctxd_memory WHERE ${VISIBLE} AND id = $4`, [...keyOf(scope), id])
        .pipe(Effect.map(({ rows }) => (rows[0] === undefined ? undefined : toDocument(rows[0]))), logFailure("memory store: read"))

    const list: MemoryStoreService["list"] = (scope, opts = {}) =>
      Effect.gen(function* () {
        const limit = clampLimit(opts.limit, defaults.pageLimit, defaults.maxPageLimit)
        if (opts.cursor !== undefined && !/^\d{1,18}$/.test(opts.cursor)) {
          return yield* new MemoryInvalid({ path: "cursor", message: "not a cursor this store returned" })
        }
        const { rows } = yield* db.query<DocRow>(
          `SELECT ${COLUMNS} FROM ctxd_memory
           WHERE ${VISIBLE} AND ($4::text IS NULL OR kind = $4) AND ($5::bigint IS NULL OR seq < $5)
           ORDER BY seq DESC LIMIT $6`,
          [...keyOf(scope), opts.kind ?? null, opts.cursor ?? null, limit + 1],
        )
        const page = rows.slice(0, limit)
        return {
          documents: page.map(toDocument),
          ...(rows.length > limit ? { nextCursor: String(page[page.length - 1]!.seq) } : {}),
        }
      }).pipe(logFailure("memory store: list"))

    const history: MemoryStoreService["history"] = (scope, id) =>
      db
        .query<{ version: number | null; body: string | null; tags: ReadonlyArray<string> | null; source: string | null; at: Date | null }>(
          `SELECT v.version, v.body, v.tags, v.source, v.at
           FROM ctxd_memory m LEFT JOIN ctxd_memory_versions v ON v.tenant = m.tenant AND v.agent = m.agent AND v.id = m.id
           WHERE m.tenant = $1 AND m.agent = $2 AND m.owner IN ('', $3) AND m.id = $4
           ORDER BY v.version DESC`,
          [...keyOf(scope), id],
        )
        .pipe(
          Effect.map(({ rows }): ReadonlyArray<Version> | undefined =>
            rows.length === 0
              ? undefined
              : rows
                  .filter((r) => r.version !== null)
                  .map((r) => ({
                    version: r.version!,
                    text: r.body!,
                    tags: r.tags!,
                    ...(r.source === null ? {} : { source: r.source }),
                    at: r.at!.toISOString(),
                  })),
          ),
          logFailure("memory store: history"),
        )

    const forget: MemoryStoreService["forget"] = (scope, id) =>
      db
        .query(`DELETE FROM ctxd_memory WHERE ${VISIBLE} AND id = $4`, [...keyOf(scope), id])
        .pipe(Effect.map(({ rowCount }) => rowCount > 0), logFailure("memory store: forget"))

    const any: MemoryStoreService["any"] = (scope, kind) =>
      db
        .query<{ any: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM ctxd_memory WHERE ${VISIBLE} AND ($4::text IS NULL OR kind = $4)) AS any`,
          [...keyOf(scope), kind ?? null],
        )
        .pipe(Effect.map(({ rows }) => rows[0]?.any === true), logFailure("memory store: any"))

    return { remember, search, read, list, history, forget, any } satisfies MemoryStoreService
  })
