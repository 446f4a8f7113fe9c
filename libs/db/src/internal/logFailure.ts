/**
 * Logs a {@link DatabaseError} (not an unavailable database: that is retried)
 * at `error` with its SQLSTATE and Postgres's message, because callers map it
 * to an `Internal` reply without its cause. Postgres's `detail` and `where`,
 * which may quote the data (prompt content), are left out.
 */
import { Effect } from "effect"
import { DatabaseError } from "../Database.ts"

export const logFailure =
  (operation: string) =>
  <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tapError(effect, (error) =>
      error instanceof DatabaseError
        ? Effect.logError(`${operation} failed: ${error.message.slice(0, 300)}`).pipe(
            Effect.annotateLogs({ sqlstate: error.code ?? "none" }),
          )
        : Effect.void,
    )
