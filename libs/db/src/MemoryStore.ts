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
import { Context, Layer, type Effect } from "effect"
import type { Database } from "./Database.ts"
import { makeMemory } from "./internal/memoryInMemory.ts"
import type { MemoryStoreService } from "./internal/memoryModel.ts"
import { make as makePostgres, type PostgresOptions } from "./internal/memoryPostgres.ts"

export * from "./internal/memoryModel.ts"
export { makeMemory }

export class MemoryStore extends Context.Tag("@ctxd/db/MemoryStore")<MemoryStore, MemoryStoreService>() {}

// ---------------------------------------------------------------------------
// In memory

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
