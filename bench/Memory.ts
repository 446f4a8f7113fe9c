/**
 * `MemoryStore.search` latency on Postgres for one tenant's agent holding N
 * documents (default 10,000; `--memory-docs 10000,1000000` for more sizes).
 *
 * Documents are 1 to 3 sentences drawn (seeded) from the real workloads'
 * user and assistant messages (tau-bench airline, SWE-agent) and the GitHub
 * MCP tool descriptions, loaded with multi-row inserts (`unnest` arrays,
 * 5,000 rows a statement) with the search indexes dropped and rebuilt after
 * the load, as a bulk import would (and the words table for fuzzy matching
 * filled in one statement). Queries: the tau-bench users' own
 * messages (prose, many words: the text search) and one or two keywords with
 * a typo (the pg_trgm fallback), each run once, in sequence, after a warm-up.
 */
import { Database, MemoryStore, Migrations } from "@ctxd/db"
import { TestDatabase, Workloads } from "@ctxd/testing"
import { Effect } from "effect"
import { argument } from "./Args.ts"
import { quantile, round, type Row } from "./Stats.ts"

const BATCH = 5_000
const QUERIES = 200

/** A small seeded generator (mulberry32), so every run loads the same documents. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? (content as ReadonlyArray<unknown>).map((p) => (typeof p === "object" && p !== null && "text" in p ? String(p.text) : "")).join(" ")
      : ""

/** Sentences of 20 to 300 characters from the workloads, de-duplicated. */
const sentences = (): ReadonlyArray<string> => {
  const texts = [
    ...Workloads.tauBenchSessions(Workloads.fullDataDir()).flatMap((s) => s.turns.flatMap((t) => t.messages)),
    ...Workloads.sweAgentSessions(Workloads.fullDataDir()).flatMap((s) => s.turns.flatMap((t) => t.messages)),
  ]
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => textOf(m.content))
  const tools = Workloads.githubCatalog(Workloads.fullDataDir()).tools.map((t) => t.function.description ?? "")
  const out = new Set<string>()
  for (const text of [...texts, ...tools]) {
    for (const s of text.split(/(?<=[.!?])\s+|\n+/)) {
      const trimmed = s.trim()
      if (trimmed.length >= 20 && trimmed.length <= 300 && /[a-z]{3}/i.test(trimmed)) out.add(trimmed)
    }
  }
  return [...out]
}

/** The queries: tau-bench user messages (prose) and one or two keywords with a typo. */
const queries = (pool: ReadonlyArray<string>) => {
  const prose = Workloads.tauBenchSessions(Workloads.fullDataDir())
    .flatMap((s) => s.turns.flatMap((t) => t.messages))
    .filter((m) => m.role === "user")
    .map((m) => textOf(m.content))
    .filter((t) => t.length >= 20)
    .slice(0, QUERIES)
  const next = random(7)
  const keywords = pool.flatMap((s) => s.match(/[a-z]{6,}/gi) ?? [])
  const typo = Array.from({ length: QUERIES }, () => {
    const word = keywords[Math.floor(next() * keywords.length)]!.toLowerCase()
    const i = 1 + Math.floor(next() * (word.length - 2))
    // swap two neighbouring letters
    return `${word.slice(0, i)}${word[i + 1]}${word[i]}${word.slice(i + 2)}`
  })
  return { prose, typo }
}

const load = (db: Database.DatabaseService, pool: ReadonlyArray<string>, docs: number) =>
  Effect.gen(function* () {
    const next = random(42)
    yield* db.query("DROP INDEX IF EXISTS ctxd_memory_tsv_gin; DROP INDEX IF EXISTS ctxd_memory_words_trgm")
    for (let start = 0; start < docs; start += BATCH) {
      const n = Math.min(BATCH, docs - start)
      const ids: Array<string> = []
      const bodies: Array<string> = []
      for (let i = 0; i < n; i++) {
        const parts = 1 + Math.floor(next() * 3)
        ids.push(`d${start + i}`)
        bodies.push(Array.from({ length: parts }, () => pool[Math.floor(next() * pool.length)]!).join(" "))
      }
      yield* db.query(
        `INSERT INTO ctxd_memory (tenant, agent, id, kind, body) SELECT 'bench', 'default', id, 'memory', body FROM unnest($1::text[], $2::text[]) AS t (id, body)`,
        [ids, bodies],
      )
    }
    yield* db.transaction((tx) =>
      Effect.gen(function* () {
        yield* tx.query("SET LOCAL maintenance_work_mem = '256MB'")
        yield* tx.query("SET LOCAL statement_timeout = 0")
        yield* tx.query("CREATE INDEX ctxd_memory_tsv_gin ON ctxd_memory USING gin (tsv)")
        const { rows } = yield* tx.query<{ nspname: string }>(
          "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'",
        )
        // the words for fuzzy matching, as MemoryStore.remember records them (its WORDS statement), in one pass
        yield* tx.query(
          `INSERT INTO ctxd_memory_words (tenant, agent, word)
           SELECT DISTINCT 'bench', 'default', w FROM ctxd_memory, regexp_split_to_table(lower(body), '[^[:alnum:]]+') AS w
           WHERE length(w) BETWEEN 3 AND 40 ON CONFLICT DO NOTHING`,
        )
        if (rows[0] !== undefined)
          yield* tx.query(`CREATE INDEX ctxd_memory_words_trgm ON ctxd_memory_words USING gin (word ${rows[0].nspname}.gin_trgm_ops)`)
      }),
    )
    yield* db.query("ANALYZE ctxd_memory")
  })

const measure = (store: MemoryStore.MemoryStoreService, list: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const scope = { tenant: "bench" }
    for (const q of list.slice(0, 20)) yield* store.search(scope, q) // warm-up
    const latencies: Array<number> = []
    let hits = 0
    for (const q of list) {
      const started = performance.now()
      hits += (yield* store.search(scope, q)).length
      latencies.push(performance.now() - started)
    }
    return { latencies, hits: hits / list.length }
  })

export const run = async (): Promise<Row[]> => {
  const sizes = (argument("memory-docs") ?? "10000").split(",").map((s) => Number(s.replace(/_/g, "")))
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new Error("--memory-docs takes document counts, e.g. 10000,1000000")
  const pool = sentences()
  const { prose, typo } = queries(pool)
  const rows: Array<Row> = []
  for (const docs of sizes) {
    rows.push(
      ...(await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const { url, schema } = yield* TestDatabase.make
            const db = yield* Database.make({ url, schema, statementTimeoutMs: 0 })
            yield* Migrations.run.pipe(Effect.provideService(Database.Database, db))
            const loadStarted = performance.now()
            yield* load(db, pool, docs)
            const loadSeconds = (performance.now() - loadStarted) / 1000
            const store = yield* MemoryStore.make().pipe(Effect.provideService(Database.Database, db))
            const text = yield* measure(store, prose)
            const fuzzy = yield* measure(store, typo)
            const { rows: size } = yield* db.query<{ bytes: string }>(
              "SELECT (pg_total_relation_size('ctxd_memory') + pg_total_relation_size('ctxd_memory_words'))::text AS bytes",
            )
            const label = `memory search, ${docs.toLocaleString("en-US")} documents, one tenant`
            return [
              {
                bench: label,
                metric: `load (multi-row inserts, ${pool.length} workload sentences) + index build`,
                value: round(loadSeconds, 1),
                unit: "s",
              },
              { bench: label, metric: "table + indexes size", value: round(Number(size[0]!.bytes) / 1024 / 1024, 1), unit: "MiB" },
              {
                bench: label,
                metric: `prose query (tau-bench user message) p50, ${prose.length} queries`,
                value: round(quantile(text.latencies, 0.5), 2),
                unit: "ms",
              },
              { bench: label, metric: "prose query p95", value: round(quantile(text.latencies, 0.95), 2), unit: "ms" },
              { bench: label, metric: "prose query hits (mean, limit 10)", value: round(text.hits, 1), unit: "hits" },
              {
                bench: label,
                metric: `keyword with a typo (pg_trgm nearest words) p50, ${typo.length} queries`,
                value: round(quantile(fuzzy.latencies, 0.5), 2),
                unit: "ms",
              },
              { bench: label, metric: "keyword with a typo p95", value: round(quantile(fuzzy.latencies, 0.95), 2), unit: "ms" },
              { bench: label, metric: "keyword with a typo hits (mean, limit 10)", value: round(fuzzy.hits, 1), unit: "hits" },
            ] satisfies Array<Row>
          }),
        ),
      )),
    )
  }
  return rows
}
