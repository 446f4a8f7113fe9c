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
} from "./memoryModel.ts"
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

/** Records the words of a text (see migration 8) for fuzzy matching. */
export const WORDS = `
  INSERT INTO ctxd_memory_words (tenant, agent, word)
  SELECT DISTINCT $1, $2, w FROM regexp_split_to_table(lower($3), '[^[:alnum:]]+') AS w
  WHERE length(w) BETWEEN 3 AND 40
  ON CONFLICT DO NOTHING`

/** True when an edit would store what the document holds already (a retried call): no new version. */
const unchanged = (
  stored: { readonly kind: Kind; readonly body: string; readonly tags: ReadonlyArray<string>; readonly source: string | null },
  v: { readonly kind: Kind; readonly text: string; readonly tags: ReadonlyArray<string>; readonly source?: string | undefined },
) =>
  stored.kind === v.kind &&
  stored.body === v.text &&
  (stored.source ?? undefined) === v.source &&
  stored.tags.length === v.tags.length &&
  stored.tags.every((t, i) => t === v.tags[i])

/** Text hits score in [0.25, 1), hits of typo-corrected words in [0, 0.25): exact words first. */
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

/** Fuzzy matching runs for queries of at most this many words (typos in a keyword or two, not prose). */
const FUZZY_MAX_WORDS = 3
/** Stored words a query word with a typo is matched to at most (the most similar, above pg_trgm's similarity_threshold, 0.3 by default). */
const FUZZY_WORDS = 3
/** Text matches ranked at most (bounds a search's cost whatever the query matches). */
const CANDIDATES = 1_000
/** A lexeme in more than this share of the rows (per the column statistics) is left out of the query, like a stop word. */
const COMMON_SHARE = 0.01
/** How long the common lexemes are reused before they are read again. */
const STATS_TTL_MS = 10 * 60_000

export interface PostgresOptions {
  /** Use pg_trgm for fuzzy matches when installed; default true (false: as without the extension). */
  readonly fuzzy?: boolean | undefined
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

    // The query's lexemes (english), less those the column's statistics
    // (pg_stats most_common_elems) find in more than COMMON_SHARE of the rows,
    // OR'ed: any may match, ts_rank_cd rewards documents with more of them,
    // close together. When every lexeme is common they are AND'ed instead.
    // At most CANDIDATES matches are ranked, so a query matching half a
    // million rows costs what one matching a thousand does.
    const TEXT_SEARCH = `
      WITH lex AS (
        SELECT lexeme FROM unnest(to_tsvector('english'::regconfig, $4))
      ), rare AS (
        SELECT lexeme FROM lex WHERE length(lexeme) > 1 AND NOT (lexeme = ANY($7::text[]))
      ), query AS (
        SELECT (CASE WHEN EXISTS (SELECT 1 FROM rare)
          THEN (SELECT string_agg(quote_literal(lexeme), ' | ') FROM rare)
          ELSE (SELECT string_agg(quote_literal(lexeme), ' & ') FROM lex) END)::tsquery AS q
      ), candidates AS (
        SELECT id, body, kind, tags, updated_at, tsv FROM ctxd_memory, query
        WHERE ${VISIBLE} AND ($5::text IS NULL OR kind = $5) AND tsv @@ query.q
        LIMIT ${CANDIDATES}
      )
      SELECT id, body, kind, tags, updated_at, ts_rank_cd(tsv, query.q, 1|32) AS rank
      FROM candidates, query
      ORDER BY rank DESC, updated_at DESC, id
      LIMIT $6`
    // the stored words nearest each query word, by trigram similarity
    const NEAREST_WORDS =
      trgm === undefined
        ? undefined
        : `SELECT DISTINCT n.word FROM unnest($3::text[]) AS t (term)
           CROSS JOIN LATERAL (
             SELECT w.word FROM ctxd_memory_words w
             WHERE w.tenant = $1 AND w.agent = $2 AND w.word OPERATOR(${trgm}.%) t.term AND w.word <> t.term
             ORDER BY ${trgm}.similarity(w.word, t.term) DESC, w.word
             LIMIT ${FUZZY_WORDS}
           ) n`

    // the column's most common lexemes, re-read every STATS_TTL_MS (one catalog query)
    let common: { readonly at: number; readonly lexemes: ReadonlyArray<string> } = { at: -Infinity, lexemes: [] }
    const commonLexemes = Effect.suspend(() =>
      Date.now() - common.at < STATS_TTL_MS
        ? Effect.succeed(common.lexemes)
        : db
            .query<{ lexeme: string }>(
              `SELECT u.lexeme FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u (lexeme, freq)
               WHERE s.schemaname = current_schema() AND s.tablename = 'ctxd_memory' AND s.attname = 'tsv'
                 AND u.lexeme IS NOT NULL AND u.freq > $1`,
              [COMMON_SHARE],
            )
            .pipe(
              Effect.map(({ rows }) => rows.map((r) => r.lexeme)),
              Effect.tap((lexemes) => Effect.sync(() => void (common = { at: Date.now(), lexemes }))),
            ),
    )

    type HitRow = { id: string; body: string; kind: Kind; tags: ReadonlyArray<string>; updated_at: Date; rank: number }
    const toHit =
      (floor: number, span: number) =>
      (r: HitRow): Hit => ({
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
        const text = yield* db.query<HitRow>(TEXT_SEARCH, [...keyOf(scope), terms.join(" "), kind, limit, yield* commonLexemes])
        const hits = text.rows.map(toHit(TEXT_FLOOR, 1 - TEXT_FLOOR))
        if (NEAREST_WORDS === undefined || hits.length >= limit || terms.length > FUZZY_MAX_WORDS) return hits
        const [tenant, agent] = keyOf(scope)
        const near = yield* db.query<{ word: string }>(NEAREST_WORDS, [tenant, agent, terms])
        if (near.rows.length === 0) return hits
        const seen = new Set(hits.map((h) => h.id))
        const fuzzy = yield* db.query<HitRow>(TEXT_SEARCH, [...keyOf(scope), near.rows.map((r) => r.word).join(" "), kind, limit, []])
        return [...hits, ...fuzzy.rows.filter((r) => !seen.has(r.id)).map(toHit(0, TEXT_FLOOR))].slice(0, limit)
      }).pipe(logFailure("memory store: search"), Effect.withSpan("MemoryStore.search"))

    const remember: MemoryStoreService["remember"] = (scope, input) =>
      Effect.flatMap(validate(input), (v) =>
        db.transaction((tx) =>
          Effect.gen(function* () {
            const [tenant, agent, user] = keyOf(scope)
            const existing =
              v.id === undefined
                ? undefined
                : (yield* tx.query<{
                    owner: string
                    version: number
                    kind: Kind
                    body: string
                    tags: ReadonlyArray<string>
                    source: string | null
                  }>(
                    "SELECT owner, version, kind, body, tags, source FROM ctxd_memory WHERE tenant = $1 AND agent = $2 AND id = $3 FOR UPDATE",
                    [tenant, agent, v.id],
                  )).rows[0]
            if (existing !== undefined && existing.owner !== "" && existing.owner !== user) {
              return yield* new MemoryInvalid({ path: "id", message: "that id belongs to another user's document" })
            }
            if (existing !== undefined && unchanged(existing, v)) return { id: v.id!, version: existing.version, created: false }
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
            yield* tx.query(WORDS, [tenant, agent, `${v.text} ${v.tags.join(" ")}`])
            yield* tx.query(
              "INSERT INTO ctxd_memory_versions (tenant, agent, id, version, body, tags, source) VALUES ($1, $2, $3, $4, $5, $6, $7)",
              [tenant, agent, id, version, v.text, v.tags, v.source ?? null],
            )
            return { id, version, created: existing === undefined }
          }),
        ),
      ).pipe(logFailure("memory store: remember"), Effect.withSpan("MemoryStore.remember"))

    const read: MemoryStoreService["read"] = (scope, id) =>
      db.query<DocRow>(`SELECT ${COLUMNS} FROM ctxd_memory WHERE ${VISIBLE} AND id = $4`, [...keyOf(scope), id]).pipe(
        Effect.map(({ rows }) => (rows[0] === undefined ? undefined : toDocument(rows[0]))),
        logFailure("memory store: read"),
      )

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
      db.query(`DELETE FROM ctxd_memory WHERE ${VISIBLE} AND id = $4`, [...keyOf(scope), id]).pipe(
        Effect.map(({ rowCount }) => rowCount > 0),
        logFailure("memory store: forget"),
      )

    const any: MemoryStoreService["any"] = (scope, kind) =>
      db
        .query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM ctxd_memory WHERE ${VISIBLE} AND ($4::text IS NULL OR kind = $4)) AS any`, [
          ...keyOf(scope),
          kind ?? null,
        ])
        .pipe(
          Effect.map(({ rows }) => rows[0]?.any === true),
          logFailure("memory store: any"),
        )

    const forgetUser: MemoryStoreService["forgetUser"] = (tenant, user) =>
      db.query(`DELETE FROM ctxd_memory WHERE tenant = $1 AND owner = $2`, [tenant, user]).pipe(
        Effect.map(({ rowCount }) => rowCount),
        logFailure("memory store: forgetUser"),
      )

    return { remember, search, read, list, history, forget, any, forgetUser } satisfies MemoryStoreService
  })
