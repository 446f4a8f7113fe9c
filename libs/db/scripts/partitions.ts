// The store's partitions, for operators (docs/data-lifecycle.md, "Scaling the store"), against
// DATABASE_URL / CTXD_DB_SCHEMA like a worker (migrations applied first):
//   node libs/db/scripts/partitions.ts status
//   node libs/db/scripts/partitions.ts convert             # a populated schema to the partitioned layout, online
//   node libs/db/scripts/partitions.ts ensure [days]       # day partitions of ctxd_turns ahead (workers do this hourly)
//   node libs/db/scripts/partitions.ts drop-before <time>  # drop the turn partitions ending at or before <time> (ISO 8601)
import { Effect } from "effect"
import { Database, Migrations, Partitions } from "../src/index.ts"

const [command = "status", arg] = process.argv.slice(2)

const program = Effect.gen(function* () {
  const options = yield* Database.config
  // conversion steps scan whole tables: no statement timeout here
  const db = yield* Database.make({ ...options, statementTimeoutMs: 0, poolMax: 2, applicationName: "ctxd-partitions" })
  const run = <A, E>(effect: Effect.Effect<A, E, Database.Database>) => Effect.provideService(effect, Database.Database, db)
  yield* run(Migrations.run)
  switch (command) {
    case "status":
      return yield* run(Partitions.status)
    case "convert":
      return yield* run(Partitions.convert())
    case "ensure":
      return yield* run(Partitions.ensureFuture(arg === undefined ? undefined : Number(arg)))
    case "drop-before": {
      const before = new Date(arg ?? "")
      if (Number.isNaN(before.getTime())) return yield* Effect.fail(new Error("drop-before needs an ISO 8601 time"))
      return yield* run(Partitions.dropBefore(before))
    }
    default:
      return yield* Effect.fail(new Error(`unknown command ${command}: status, convert, ensure [days], drop-before <time>`))
  }
})

const result = await Effect.runPromise(Effect.scoped(program))
console.log(JSON.stringify(result, null, 2))
