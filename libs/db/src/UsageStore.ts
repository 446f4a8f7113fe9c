/**
 * Usage reports counted once per turn (`ctxd_usage_reports`, migration 6):
 * the usage endpoint is served by any worker, so "already counted" must be
 * durable and shared. {@link UsageStore.claim} inserts `(tenant, session,
 * turn_id)` with `ON CONFLICT DO NOTHING`: the first report of a turn claims
 * it, every later one (on any worker) is a duplicate. {@link layerMemory}:
 * the same in one process's memory.
 */
import { Effect, Layer } from "effect"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"

type Failure = DatabaseUnavailable | DatabaseError

export class UsageStore extends Effect.Service<UsageStore>()("@ctxd/db/UsageStore", {
  effect: Effect.gen(function* () {
    const db = yield* Database

    /** Records the report of a turn; true when it is the first one (count it), false for a duplicate. */
    const claim = (tenant: string, session: string, turnId: string, billed: number): Effect.Effect<boolean, Failure> =>
      db
        .query(
          `INSERT INTO ctxd_usage_reports (tenant, session, turn_id, billed) VALUES ($1, $2, $3, $4)
           ON CONFLICT (tenant, session, turn_id) DO NOTHING`,
          [tenant, session, turnId, billed],
        )
        .pipe(Effect.map(({ rowCount }) => rowCount > 0))

    return { claim } as const
  }),
}) {}

/** The store; needs a migrated {@link Database}. */
export const layer: Layer.Layer<UsageStore, never, Database> = UsageStore.Default

/** The store in memory: the first claim of a turn wins; a fresh, empty store per build (unbounded: one process's use). */
export const layerMemory: Layer.Layer<UsageStore> = Layer.sync(UsageStore, () => {
  const claimed = new Set<string>()
  return UsageStore.make({
    claim: (tenant, session, turnId) =>
      Effect.sync(() => {
        const key = JSON.stringify([tenant, session, turnId])
        if (claimed.has(key)) return false
        claimed.add(key)
        return true
      }),
  })
})
