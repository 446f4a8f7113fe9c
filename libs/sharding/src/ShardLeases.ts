/**
 * Shard ownership for one worker: Postgres leases with a TTL on the database
 * clock and a fencing epoch.
 *
 * Every refresh interval the worker reads the live workers
 * ({@link Membership.Membership}), computes the shared assignment
 * ({@link Assignment.assign}), stops serving and releases the shards no
 * longer assigned to it (so their new owner can take them at once), then in
 * one statement renews the leases it holds and takes the free or expired
 * leases of its other assigned shards. A takeover raises the shard's epoch;
 * a renewal keeps it. Commits carry {@link ShardLeasesService.fence}, which
 * the session store checks against the lease row in the commit's transaction.
 *
 * What the worker believes it owns lives in memory and is valid until the
 * time it sent the last successful renewal plus the TTL minus the safety
 * margin, on its monotonic clock; the database stamped the lease later than
 * that send, so the worker stops serving ({@link ShardLeasesService.isOwner}
 * turns false) before anyone else can take the shard, even when it cannot
 * reach Postgres at all.
 *
 * Closing the scope releases every lease at once (after a round in flight
 * ends), so a graceful stop hands over within one refresh interval of the
 * others; a crashed worker's shards move after the TTL, or sooner when it is
 * reported {@link ShardLeasesService.unreachable} (nobody listens on its NATS
 * subject) and its heartbeat is late as well: then it is declared dead and
 * its leases expire at once. A worker declared dead by mistake (alive, but
 * off NATS for a moment) re-registers with its next heartbeat and gets its
 * shards back; the writes it may still attempt with its old leases are
 * fenced out. Routing may also hint that a round is due now
 * ({@link ShardLeasesService.refreshSoon}), so a handover need not wait for
 * the next scheduled round.
 *
 * An `Effect.Service` ({@link ShardLeases}): one implementation; tests build
 * several workers in one process, each on its own config and database.
 */
import { Database } from "@ctxd/db"
import { Clock, Duration, Effect, Layer, Option, PubSub, Schedule, type Scope, Stream } from "effect"
import * as Assignment from "./Assignment.ts"
import type { ShardChange, ShardLeasesService, ShardStatus } from "./internal/leaseModel.ts"
import * as Sql from "./internal/sql.ts"
import { Membership, type Worker } from "./Membership.ts"
import * as ShardId from "./ShardId.ts"
import { ShardingConfig } from "./ShardingConfig.ts"

export type * from "./internal/leaseModel.ts"

interface Held {
  readonly epoch: number
  /** Monotonic nanoseconds after which the shard must not be served. */
  readonly validUntil: bigint
}

interface View {
  readonly workers: ReadonlyMap<string, Worker>
  readonly assignment: ReadonlyArray<string>
  /** Live lease holders by shard. */
  readonly holders: ReadonlyMap<number, string>
}

const ms = (n: number): bigint => BigInt(Math.round(n * 1_000_000))

// Graceful release should not hold a shutdown up when Postgres is gone.
const RELEASE_TIMEOUT = Duration.seconds(5)

/**
 * Builds the leases of this worker (whose {@link Membership} checked the
 * cluster's shard count): seeds the lease rows, runs a first round, then
 * keeps renewing until the scope closes.
 */
export const make: Effect.Effect<
  ShardLeasesService,
  Database.DatabaseUnavailable | Database.DatabaseError,
  Database.Database | Membership | ShardingConfig | Scope.Scope
> = Effect.gen(function* () {
  const db = yield* Database.Database
  const membership = yield* Membership
  const config = yield* ShardingConfig
  const self = membership.self
  const me = self.id
  const interval = Duration.millis(config.refreshIntervalMs)
  const validity = ms(config.leaseTtlMs - config.safetyMarginMs)

  yield* db.query(Sql.SEED, [config.shards])

  const owned = new Map<number, Held>()
  let view: View = { workers: new Map(), assignment: [], holders: new Map() }
  let stopping = false
  // when the last successful claim was sent (monotonic nanoseconds)
  let renewedAt = -1n << 62n
  const hub = yield* PubSub.unbounded<ShardChange>()
  const lock = yield* Effect.makeSemaphore(1)

  const announce = (change: ShardChange) => PubSub.publish(hub, change)

  const valid = (held: Held | undefined, now: bigint): held is Held => held !== undefined && !stopping && now < held.validUntil

  const drop = (shard: number) =>
    Effect.suspend(() => {
      const held = owned.get(shard)
      if (held === undefined) return Effect.void
      owned.delete(shard)
      return announce({ _tag: "Lost", shard, epoch: held.epoch })
    })

  const logChanges = (acquired: number, lost: number) =>
    acquired + lost === 0 ? Effect.void : Effect.logInfo(`shards: +${acquired} -${lost}, owning ${owned.size}`)

  /** Forgets the shards whose local validity has ended. */
  const sweep = Effect.gen(function* () {
    const now = yield* Clock.currentTimeNanos
    const lapsed = [...owned].filter(([, held]) => now >= held.validUntil).map(([shard]) => shard)
    yield* Effect.forEach(lapsed, drop, { discard: true })
    if (lapsed.length > 0) yield* Effect.logWarning(`shards lapsed without renewal: ${lapsed.length}`)
  })

  // the assignment only changes with the set of workers
  let assigned = { key: "", owners: [] as ReadonlyArray<string> }
  const assignmentOf = (workers: ReadonlyArray<Worker>) => {
    const key = workers.map((w) => w.id).join("\n")
    if (key !== assigned.key || assigned.owners.length === 0) {
      assigned = {
        key,
        owners: Assignment.assign(
          workers.map((w) => w.id),
          config.shards,
        ),
      }
    }
    return assigned.owners
  }

  const round = Effect.gen(function* () {
    if (stopping) return
    yield* sweep
    const workers = yield* membership.live
    const assignment = assignmentOf(workers)
    const mine = Assignment.shardsOf(assignment, me)
    view = { ...view, workers: new Map(workers.map((w) => [w.id, w])), assignment }

    // stop serving before the lease can pass to anyone else
    const leaving = [...owned.keys()].filter((shard) => assignment[shard] !== me)
    yield* Effect.forEach(leaving, drop, { discard: true })
    yield* db.query(Sql.RELEASE_OTHERS, [me, mine])

    const held = mine.map((shard) => String(owned.get(shard)?.epoch ?? -1))
    const sentAt = yield* Clock.currentTimeNanos
    const claimed = yield* db.query<{ shard: number; epoch: string }>(Sql.CLAIM, [me, config.leaseTtlMs, mine, held])
    const validUntil = sentAt + validity
    renewedAt = sentAt
    const got = new Map(claimed.rows.map((row) => [row.shard, Number(row.epoch)]))
    let acquired = 0
    let lost = leaving.length
    for (const shard of mine) {
      const before = owned.get(shard)
      const epoch = got.get(shard)
      if (epoch === undefined) {
        if (before !== undefined) lost++
        yield* drop(shard)
      } else if (before !== undefined && before.epoch === epoch) {
        owned.set(shard, { epoch, validUntil })
      } else {
        if (before !== undefined) lost++
        yield* drop(shard)
        owned.set(shard, { epoch, validUntil })
        acquired++
        yield* announce({ _tag: "Acquired", shard, epoch })
      }
    }
    yield* logChanges(acquired, lost)

    const holders = yield* db.query<{ shard: number; owner: string; live: boolean }>(Sql.HOLDERS)
    view = { ...view, holders: new Map(holders.rows.filter((r) => r.live).map((r) => [r.shard, r.owner])) }
  })

  const refresh = lock
    .withPermits(1)(round)
    .pipe(Effect.annotateLogs({ worker: me }))

  let hinted = -1n << 62n
  const hints = yield* Effect.makeSemaphore(1)
  const refreshSoon: Effect.Effect<void> = hints
    .withPermits(1)(
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeNanos
        if (stopping || now - hinted < ms(config.refreshIntervalMs / 4)) return
        if (now - renewedAt > ms(config.refreshIntervalMs * 1.5)) return
        hinted = now
        yield* refresh
      }),
    )
    .pipe(
      Effect.timeout(interval),
      Effect.catchAllCause((cause) => Effect.logWarning("hinted lease round failed", cause)),
      Effect.annotateLogs({ worker: me }),
    )

  // worker id → when it was last checked (monotonic nanoseconds)
  const suspects = new Map<string, bigint>()
  const unreachable = (worker: string): Effect.Effect<boolean> =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeNanos
      const last = suspects.get(worker)
      if (worker === me || stopping || !view.workers.has(worker)) return false
      if (last !== undefined && now - last < ms(config.refreshIntervalMs / 4)) return false
      suspects.set(worker, now)
      const { rows } = yield* db.query<{ dead: boolean; freed: number; listed: boolean }>(Sql.DECLARE_DEAD, [
        worker,
        config.refreshIntervalMs + config.safetyMarginMs,
      ])
      const result = rows[0]
      if (result === undefined || (result.listed && !result.dead)) return false
      if (result.dead) {
        yield* Effect.logWarning(`worker ${worker} is unreachable and its heartbeat late: declared dead, ${result.freed} shards freed`)
      }
      yield* refresh
      return true
    }).pipe(
      Effect.timeout(interval),
      Effect.catchAllCause((cause) => Effect.as(Effect.logWarning(`could not check worker ${worker}`, cause), false)),
      Effect.annotateLogs({ worker: me, suspect: worker }),
    )

  // the clock of the scope that made the service (a test's TestClock): read in one step, not as a service per call
  const clock = yield* Effect.clock
  const isOwnerNow = (shard: number) => valid(owned.get(shard), clock.unsafeCurrentTimeNanos())
  const isOwner = (shard: number) => Effect.sync(() => isOwnerNow(shard))

  const fence = (shard: number) =>
    Effect.sync(() => {
      const held = owned.get(shard)
      return valid(held, clock.unsafeCurrentTimeNanos()) ? Option.some({ shard, owner: me, epoch: held.epoch }) : Option.none()
    })

  const ownedShards = Effect.map(Clock.currentTimeNanos, (now) =>
    [...owned]
      .filter(([, held]) => valid(held, now))
      .map(([shard, held]) => ({ shard, epoch: held.epoch }))
      .sort((a, b) => a.shard - b.shard),
  )

  const owner = (shard: number) =>
    Effect.map(isOwner(shard), (mineNow): Option.Option<Worker> => {
      if (mineNow) return Option.some(self)
      const holder = view.holders.get(shard)
      const live = holder === undefined ? undefined : view.workers.get(holder)
      if (live !== undefined) return Option.some(live)
      const assigned = view.assignment[shard]
      return Option.fromNullable(assigned === undefined ? undefined : view.workers.get(assigned))
    })

  const status = Effect.map(Clock.currentTimeNanos, (now): ShardStatus => {
    const mine = Assignment.shardsOf(view.assignment, me)
    return {
      joined: !stopping && view.workers.has(me) && now - renewedAt < validity,
      assigned: mine.length,
      owned: [...owned.values()].filter((held) => valid(held, now)).length,
      missing: mine.filter((shard) => !valid(owned.get(shard), now)).length,
    }
  })

  const changes = Stream.unwrapScoped(
    Effect.gen(function* () {
      const queue = yield* PubSub.subscribe(hub)
      const current = yield* ownedShards
      return Stream.concat(Stream.fromIterable(current.map((o): ShardChange => ({ _tag: "Acquired", ...o }))), Stream.fromQueue(queue))
    }),
  )

  yield* refresh.pipe(Effect.catchAllCause((cause) => Effect.logWarning("first lease round failed", cause)))

  yield* refresh.pipe(
    Effect.timeout(interval),
    Effect.catchAllCause((cause) => Effect.logWarning("lease round failed", cause)),
    Effect.repeat(Schedule.fixed(interval)),
    Effect.annotateLogs({ worker: me, loop: "leases" }),
    Effect.forkScoped,
  )
  yield* sweep.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("lease sweep failed", cause)),
    Effect.repeat(Schedule.spaced(Duration.millis(Math.max(5, config.refreshIntervalMs / 4)))),
    Effect.annotateLogs({ worker: me, loop: "lease-sweep" }),
    Effect.forkScoped,
  )

  // Added after the loops, so it runs before they are interrupted: a round
  // in flight finishes first (its claim could otherwise land after the release).
  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      stopping = true
      yield* lock.withPermits(1)(
        Effect.gen(function* () {
          const count = owned.size
          yield* Effect.forEach([...owned.keys()], drop, { discard: true })
          yield* db.query(Sql.RELEASE_ALL, [me])
          yield* Effect.logInfo(`released ${count} shards`)
        }),
      )
    }).pipe(
      Effect.timeout(Duration.sum(interval, RELEASE_TIMEOUT)),
      Effect.catchAllCause((cause) => Effect.logWarning("could not release shard leases", cause)),
      Effect.annotateLogs({ worker: me }),
    ),
  )

  return {
    self,
    shards: config.shards,
    shardOf: (tenant, session) => ShardId.of(tenant, session, config.shards),
    isOwner,
    isOwnerNow,
    fence,
    ownedShards,
    owner,
    changes,
    refresh,
    refreshSoon,
    unreachable,
    status,
  } satisfies ShardLeasesService
})

/** This worker's shard leases. Needs a migrated {@link Database.Database}, the {@link ShardingConfig} and {@link Membership}. */
export class ShardLeases extends Effect.Service<ShardLeases>()("@ctxd/sharding/ShardLeases", { scoped: make }) {}

/**
 * The leases of a process that owns every shard for good: one process alone
 * (`ctxd replay`, the benches, tests of the turn shell), no database. Every
 * shard is owned at epoch 0 from the start, fences always pass, nothing ever
 * changes hands (`changes` announces each shard once), and there is no other
 * worker to route to. `shards` defaults to {@link ShardId.DEFAULT_SHARDS}, so a
 * session has the shard it would have in a fleet of the default size.
 */
export const makeOwner = (options: { readonly self?: Worker | undefined; readonly shards?: number | undefined } = {}): ShardLeases => {
  const self = options.self ?? { id: "in-process", address: "" }
  const shards = Math.max(1, Math.floor(options.shards ?? ShardId.DEFAULT_SHARDS))
  const all = Array.from({ length: shards }, (_, shard) => ({ shard, epoch: 0 }))
  return ShardLeases.make({
    self,
    shards,
    shardOf: (tenant, session) => ShardId.of(tenant, session, shards),
    isOwner: () => Effect.succeed(true),
    isOwnerNow: () => true,
    fence: (shard) => Effect.succeed(Option.some({ shard, owner: self.id, epoch: 0 })),
    ownedShards: Effect.succeed(all),
    owner: () => Effect.succeed(Option.some(self)),
    changes: Stream.fromIterable(all.map((o): ShardChange => ({ _tag: "Acquired", ...o }))),
    refresh: Effect.void,
    refreshSoon: Effect.void,
    unreachable: () => Effect.succeed(false),
    status: Effect.succeed({ joined: true, assigned: shards, owned: shards, missing: 0 }),
  })
}

/** {@link makeOwner} as a layer: this process owns every shard, no database or membership needed. */
export const layerMemory = (options: Parameters<typeof makeOwner>[0] = {}): Layer.Layer<ShardLeases> =>
  Layer.sync(ShardLeases, () => makeOwner(options))

/** The leases with this worker's membership, both exposed; needs a migrated {@link Database.Database} and the {@link ShardingConfig}. */
export const layer: Layer.Layer<
  ShardLeases | Membership,
  ShardId.ShardCountMismatch | Database.DatabaseUnavailable | Database.DatabaseError,
  Database.Database | ShardingConfig
> = ShardLeases.Default.pipe(Layer.provideMerge(Membership.Default))
