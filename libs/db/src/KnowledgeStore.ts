/**
 * Knowledge documents per tenant and agent (`ctxd_knowledge`): what the
 * `<root>.v1.knowledge.<tenant>` endpoint edits and what a turn's
 * `load_knowledge` answers from. Every query names the tenant.
 * {@link layer}: Postgres; {@link layerMemory}: the same in memory.
 */
import type { Knowledge } from "@ctxd/contracts"
import { Effect, Layer } from "effect"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"
import { logFailure } from "./internal/logFailure.ts"

type Failure = DatabaseUnavailable | DatabaseError

export class KnowledgeStore extends Effect.Service<KnowledgeStore>()("@ctxd/db/KnowledgeStore", {
  effect: Effect.gen(function* () {
    const db = yield* Database

    /** The agent's documents, by id. */
    const docs = (tenant: string, agent: string): Effect.Effect<ReadonlyArray<Knowledge.Doc>, Failure> =>
      db
        .query<{ id: string; title: string; body: string }>(
          "SELECT id, title, body FROM ctxd_knowledge WHERE tenant = $1 AND agent = $2 ORDER BY id",
          [tenant, agent],
        )
        .pipe(
          Effect.map(({ rows }) => rows.map((r) => ({ id: r.id, title: r.title, text: r.body }))),
          logFailure("knowledge store: docs"),
        )

    /**
     * One page of the agent's index (id and title, no text), by id, starting
     * after `after` (exclusive; from the start when undefined): at most
     * `limit` documents, and `more` when there are others after them.
     */
    const page = (
      tenant: string,
      agent: string,
      after: string | undefined,
      limit: number,
    ): Effect.Effect<{ readonly docs: ReadonlyArray<{ readonly id: string; readonly title: string }>; readonly more: boolean }, Failure> =>
      db
        .query<{ id: string; title: string }>(
          `SELECT id, title FROM ctxd_knowledge
           WHERE tenant = $1 AND agent = $2 AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $4`,
          [tenant, agent, after ?? null, limit + 1],
        )
        .pipe(Effect.map(({ rows }) => ({ docs: rows.slice(0, limit), more: rows.length > limit })))

    /** Adds or replaces a document. */
    const add = (tenant: string, agent: string, doc: Knowledge.Doc): Effect.Effect<void, Failure> =>
      db
        .query(
          `INSERT INTO ctxd_knowledge (tenant, agent, id, title, body) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (tenant, agent, id) DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body, updated_at = now()`,
          [tenant, agent, doc.id, doc.title, doc.text],
        )
        .pipe(Effect.asVoid)

    /** Removes a document; true when there was one. */
    const remove = (tenant: string, agent: string, id: string): Effect.Effect<boolean, Failure> =>
      db
        .query("DELETE FROM ctxd_knowledge WHERE tenant = $1 AND agent = $2 AND id = $3", [tenant, agent, id])
        .pipe(Effect.map(({ rowCount }) => (rowCount ?? 0) > 0))

    return { docs, page, add, remove } as const
  }),
}) {}

/** The store; needs a migrated {@link Database}. */
export const layer: Layer.Layer<KnowledgeStore, never, Database> = KnowledgeStore.Default

/**
 * The store in memory, with the Postgres store's answers (documents by id,
 * pages after an id, add replaces, remove says whether there was one); for
 * `ctxd replay` and fast unit tests. Unbounded: for one process's use.
 */
export const makeMemory = (): KnowledgeStore => {
  const agents = new Map<string, Map<string, Knowledge.Doc>>()
  const docsOf = (tenant: string, agent: string) =>
    [...(agents.get(`${tenant}\u0000${agent}`)?.values() ?? [])].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  return KnowledgeStore.make({
    docs: (tenant, agent) => Effect.sync(() => docsOf(tenant, agent)),
    page: (tenant, agent, after, limit) =>
      Effect.sync(() => {
        const rest = docsOf(tenant, agent).filter((d) => after === undefined || d.id > after)
        return { docs: rest.slice(0, limit).map((d) => ({ id: d.id, title: d.title })), more: rest.length > limit }
      }),
    add: (tenant, agent, doc) =>
      Effect.sync(() => {
        const key = `${tenant}\u0000${agent}`
        const docs = agents.get(key) ?? new Map<string, Knowledge.Doc>()
        docs.set(doc.id, { id: doc.id, title: doc.title, text: doc.text })
        agents.set(key, docs)
      }),
    remove: (tenant, agent, id) => Effect.sync(() => agents.get(`${tenant}\u0000${agent}`)?.delete(id) ?? false),
  })
}

/** The store in memory ({@link makeMemory}); a fresh, empty store per build. */
export const layerMemory: Layer.Layer<KnowledgeStore> = Layer.sync(KnowledgeStore, makeMemory)
