/** The session store's records and its three refusals (a stale last seq, a known turn id, a lost lease). */
import type { Conversation } from "@ctxd/contracts"
import { Data } from "effect"

/** A stored message and how many tokens it was counted as, with which encoding. */
export interface StoredMessage {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
  readonly encoding: string
}

/** A committed turn: the hash of its request and the reply that was sent. */
export interface StoredTurn {
  readonly turnId: string
  readonly requestHash: string
  /** The reply that was sent; {@link EXPIRED_REPLY} once the reply was pruned (see `expired`). */
  readonly reply: unknown
  /** Present (true) when the reply was pruned after the idempotency window (`LifecycleStore.pruneReplies`). */
  readonly expired?: true
  /** The sequence numbers of the messages it appended (`firstSeq > lastSeq` when it appended none). */
  readonly firstSeq: number
  readonly lastSeq: number
}

/** A committed turn as {@link SessionStore.listTurns} lists it (no reply). */
export interface TurnEntry {
  readonly turnId: string
  readonly firstSeq: number
  readonly lastSeq: number
  readonly createdAt: Date
}

/** A message to append. */
export interface NewMessage {
  readonly message: Conversation.Message
  readonly tokens: number
  readonly encoding: string
}

/** Everything one turn writes. */
export interface CommitTurn {
  readonly tenant: string
  readonly session: string
  readonly turnId: string
  readonly requestHash: string
  /** The `last_seq` the caller's view of the session ends at (0 for a new session). */
  readonly expectedLastSeq: number
  readonly messages: ReadonlyArray<NewMessage>
  /** The reply, stored as JSON so a retry of the turn gets it back. */
  readonly reply: unknown
  /**
   * The reply's UTF-8 JSON text, when the caller encoded it already (to send
   * it): stored as it is, not encoded again. It must be `reply`'s JSON.
   */
  readonly replyUtf8?: Uint8Array | undefined
  /** The writer's shard lease; when present the commit is applied only while that lease is current. */
  readonly fence?: Fence | undefined
  /**
   * The session's agent and its turns once this commit is stored: recorded
   * for the agent's history of session lengths (`SessionLengthStore`) in the same
   * statement, only if the commit succeeds (absent: not recorded).
   */
  readonly length?: Length | undefined
  /** The user the turn acts for (`options.user`): recorded for the session on success, for deleting a user's data. */
  readonly user?: string | undefined
}

/** A session's length as a commit records it: its agent and its turns (assistant messages stored). */
export interface Length {
  readonly agent: string
  readonly turns: number
}

/** A shard lease as the writer holds it: `ctxd_shard_leases` row `shard` with this `owner` and `epoch`. */
export interface Fence {
  readonly shard: number
  readonly owner: string
  readonly epoch: bigint | number
}

/** The sequence numbers a commit appended (`firstSeq > lastSeq` when it appended none). */
export interface Committed {
  readonly firstSeq: number
  readonly lastSeq: number
}

/** Another writer appended to the session since the caller loaded it: reload the new messages and retry. */
export class SeqConflict extends Data.TaggedError("SeqConflict")<{
  readonly message: string
  readonly expectedLastSeq: number
  readonly actualLastSeq: number
}> {}

/** The turn id was committed before. Same request hash: answer `stored.reply`; different: a conflict. */
export class TurnExists extends Data.TaggedError("TurnExists")<{
  readonly message: string
  readonly stored: StoredTurn
}> {}

/** The writer's shard lease is no longer current (released, expired, or taken over with a newer epoch); nothing was written. */
export class NotOwner extends Data.TaggedError("NotOwner")<{
  readonly message: string
  readonly shard: number
  readonly owner: string
  readonly epoch: string
}> {}
