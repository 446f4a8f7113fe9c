/**
 * A turn sent with the client's whole history (`history: "client"`): which
 * stored session it continues, and what of it is new. The client's history
 * (normalized) is matched (`ClientHistory.match`) against the session's
 * branches (`Branches.candidates`: the one this worker's cached state holds,
 * the newest ones, the session itself); of those it extends, the one
 * holding the most of it takes the turn (the first on a tie), with only the
 * client's messages after the matched ones as new (a branch is read only
 * when its stored length could beat the best match so far). When
 * it extends none, the turn starts a new branch holding the client's whole
 * history, and the report says from which session it forked and where.
 *
 * Gemini calls without an id get ids made up from their position in the
 * client's history (a fixed seed instead of the turn id), so the same call
 * normalizes alike on every resend.
 */
import { Normalize, Providers } from "@ctxd/context"
import type { Conversation, Turn } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { ShardLeases } from "@ctxd/sharding"
import { Effect } from "effect"
import * as Branches from "./Branches.ts"
import * as ClientHistory from "./ClientHistory.ts"
import * as Commit from "./Commit.ts"
import * as Decode from "./Decode.ts"
import type * as SessionState from "./SessionState.ts"

/** The seed of the ids made up for Gemini calls without one in a client's history. */
const SEED = "client-history"

/** Where a client-history turn goes, and what of it is new. */
export interface Resolved {
  /** The stored session the turn continues (the session itself or a branch). */
  readonly session: string
  readonly branch: number
  /** This worker's state of that session, when it holds it (else the turn loads it). */
  readonly cached: SessionState.SessionState | undefined
  /** The client's new messages (after the matched ones), their `sourceIndex` still the client's. */
  readonly messages: ReadonlyArray<Normalize.NormalizedMessage>
  readonly report: Turn.HistoryReport
}

/** `request` with an empty history: what the turn's system and tools are normalized from. */
export const withoutHistory = (request: Turn.TurnRequest): Turn.TurnRequest =>
  ({ ...request, [Providers.of(request.format).historyField]: [] }) as Turn.TurnRequest

/** The client's whole history in neutral form (a given request's content as it is). */
export const clientMessages = (decoded: Decode.Decoded): ReadonlyArray<Normalize.NormalizedMessage> => {
  if (decoded.normalized !== undefined) return decoded.normalized.messages
  const { system: _system, tools: _tools, ...rest } = decoded.request
  return Normalize.request({ ...rest, turnId: SEED } as Turn.TurnRequest, () => []).messages
}

/**
 * The turn's content in neutral form: its system and tools as every turn's
 * (`Decode.normalized`, the cached parts reused), its messages the new ones
 * of `resolved`.
 */
export const normalized = (
  decoded: Decode.Decoded,
  resolved: Resolved,
  workspace: ReadonlyArray<Conversation.SystemSection> | undefined,
): Normalize.NormalizedRequest => {
  const base = decoded.normalized ?? Decode.normalized({ ...decoded, request: withoutHistory(decoded.request) }, () => [], workspace)
  return { ...base, messages: resolved.messages }
}

/** The resolver of this worker: it remembers each session's newest branch known to exist. */
export const make = Effect.gen(function* () {
  const store = yield* SessionStore.SessionStore
  const leases = yield* ShardLeases.ShardLeases
  // each session's newest branch seen here; only grows (a branch is never removed but with its session)
  const newest = new Map<string, number>()
  const NEWEST = 65_536

  const idOf = (tenant: string, session: string, k: number) => Branches.branchId(tenant, session, k, leases.shardOf)
  const exists = (tenant: string, session: string) =>
    Effect.map(store.listTurns(tenant, session, 1), (turns) => turns.length > 0).pipe(Effect.mapError(Commit.storeError))

  /** The newest branch of the session: from the one seen last, asking for the next until there is none. */
  const newestOf = (tenant: string, session: string, trusted: boolean) =>
    Effect.gen(function* () {
      const key = `${tenant}\u0000${session}`
      let k = newest.get(key) ?? 0
      // a cached state of the session on this worker: no one else writes its branches (they share its shard)
      if (!(trusted && newest.has(key))) {
        // the session may have been deleted since (its branches with it): then from the session itself
        if (k > 0 && !(yield* exists(tenant, idOf(tenant, session, k)))) k = 0
        while (yield* exists(tenant, idOf(tenant, session, k + 1))) k++
      }
      if (newest.size >= NEWEST) newest.clear()
      newest.set(key, k)
      return k
    })

  /**
   * Where the client's history `decoded` continues `tenant`/`session`,
   * `cached` the state this worker holds for it (the branch it last served).
   */
  const resolve = (tenant: string, session: string, decoded: Decode.Decoded, cached: SessionState.SessionState | undefined) =>
    Effect.gen(function* () {
      const client = clientMessages(decoded)
      const messages = client.map((n) => n.message)
      const held = cached?.stored
      const top = yield* newestOf(tenant, session, held !== undefined)
      const tried = Branches.candidates(top, held?.branch)
      let first: ClientHistory.Match | undefined
      // the branch holding the most of the client's history takes the turn: the least is appended again
      let best: Resolved | undefined
      for (const k of tried) {
        const id = idOf(tenant, session, k)
        const own = held !== undefined && held.branch === k ? cached : undefined
        if (best !== undefined && own === undefined) {
          // a branch stores at least as many messages as it matches: one storing no more than the best matched cannot beat it
          const latest = yield* store.listTurns(tenant, id, 1).pipe(Effect.mapError(Commit.storeError))
          if ((latest[0]?.lastSeq ?? 0) <= best.report.matched) continue
        }
        const stored: ReadonlyArray<Conversation.Message> =
          own !== undefined
            ? own.messages.map((r) => r.message)
            : (yield* store.loadMessages(tenant, id, 0).pipe(Effect.mapError(Commit.storeError))).map((r) => r.message)
        const match = ClientHistory.match(stored, messages)
        first ??= match
        if (match._tag === "Extends" && (best === undefined || match.matched > best.report.matched)) {
          best = {
            session: id,
            branch: k,
            cached: own,
            messages: client.slice(match.matched),
            report: { mode: "client", session: id, branch: k, matched: match.matched, appended: client.length - match.matched },
          }
          // all of it is stored here already: no branch holds more
          if (match.matched === client.length) break
        }
      }
      if (best !== undefined) return best
      // a late retry of a turn stored before the session moved on: that turn, not a fork (its commit replays the reply)
      for (const k of tried) {
        const id = idOf(tenant, session, k)
        const stored = yield* store.findTurn(tenant, id, decoded.request.turnId).pipe(Effect.mapError(Commit.storeError))
        if (stored._tag === "Some") {
          const own = held !== undefined && held.branch === k ? cached : undefined
          return {
            session: id,
            branch: k,
            cached: own,
            messages: [],
            report: { mode: "client", session: id, branch: k, matched: 0, appended: 0 },
          } satisfies Resolved
        }
      }
      const forked = first as Extract<ClientHistory.Match, { _tag: "Forked" }>
      const k = top + 1
      const id = idOf(tenant, session, k)
      newest.set(`${tenant}\u0000${session}`, k)
      return {
        session: id,
        branch: k,
        cached: undefined,
        messages: client,
        report: {
          mode: "client",
          session: id,
          branch: k,
          matched: 0,
          appended: client.length,
          forked: { from: idOf(tenant, session, tried[0]!), at: forked.at, reason: forked.reason },
        },
      } satisfies Resolved
    })

  return { resolve } as const
})

/** Branches a usage report's turn is looked for in: 64 (a session forked more often reports to the branch itself). */
export const MAX_LOOKUP = 64

/**
 * The branches of `tenant`/`session` that exist (a turn committed to
 * each), oldest first, at most {@link MAX_LOOKUP}: branch k is asked for
 * while k - 1 exists (a branch is only ever made next to the newest).
 */
export const branchesOf = (tenant: string, session: string) =>
  Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    const leases = yield* ShardLeases.ShardLeases
    const branches: Array<string> = []
    for (let k = 1; k <= MAX_LOOKUP; k++) {
      const id = Branches.branchId(tenant, session, k, leases.shardOf)
      if ((yield* store.listTurns(tenant, id, 1)).length === 0) break
      branches.push(id)
    }
    return branches as ReadonlyArray<string>
  })

/**
 * A stored turn of `tenant`/`session` or, when the session has none of
 * that id, of one of its branches (newest first): a client-history turn is
 * stored where `report.history.session` says, while a caller may report its
 * usage to the session it asked. `None` when neither holds it.
 */
export const findTurn = (tenant: string, session: string, turnId: string) =>
  Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    const own = yield* store.findTurn(tenant, session, turnId)
    if (own._tag === "Some") return own
    for (const id of [...(yield* branchesOf(tenant, session))].reverse()) {
      const found = yield* store.findTurn(tenant, id, turnId)
      if (found._tag === "Some") return found
    }
    return own
  })
