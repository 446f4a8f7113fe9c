/**
 * Usage reports counted once per turn (`ctxd_usage_reports`, migration 6):
 * the usage endpoint is served by any worker, so "already counted" must be
 * durable and shared. {@link UsageStore.claim} inserts `(tenant, session,
 * turn_id)` with `ON CONFLICT DO NOTHING`: the first report of a turn claims
 * it, every later one (on any worker) is a duplicate.
 */
import { Effect, type Layer } from "effect"
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
