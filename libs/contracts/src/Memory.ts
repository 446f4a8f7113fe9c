/**
 * `<root>.v1.memory.<tenant>`: an agent's memories (and learnings) per
 * tenant, optionally per user. `remember` stores or edits one, `search`
 * ranks them for a query, `read`, `list` (paged), `history` and `forget`.
 * A turn sees the memories of its `options.agent` and `options.user`.
 *
 * Scope: a request without `user` acts on the agent's shared documents; with
 * a `user`, on that user's documents and the agent's shared ones (a new
 * document is stored under the user).
 */
import { Schema } from "effect"

/** The limits every request is checked against (the store checks them again). */
export const limits = {
  /** Characters of a document's text. */
  textChars: 8_000,
  tags: 16,
  tagChars: 64,
  sourceChars: 256,
  queryChars: 1_000,
  /** Hits of a search when a request names no `limit`, and the most it may ask for. */
  searchLimit: 10,
  maxSearchLimit: 50,
  /** Documents of a list page when a request names no `limit`, and the most it may ask for. */
  pageLimit: 20,
  maxPageLimit: 100,
  /** Earlier versions a document keeps (besides the current one). */
  versions: 20,
  /** A reply's documents stop before they take more than this many bytes of JSON (256 KB); `truncated` says so. */
  replyBytes: 256 * 1024,
} as const

const Token = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/))
const Id = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.:-]{1,128}$/, { message: () => "id must match [A-Za-z0-9_.:-]{1,128}" }))
/** The agent (default `default`). */
const agent = Schema.optional(Token)
/** The user, when the memories are one user's (absent: the agent's shared memories). */
const user = Schema.optional(Token)
export const Kind = Schema.Literal("memory", "learning")
export type Kind = typeof Kind.Type

export const Remember = Schema.Struct({
  op: Schema.Literal("remember"),
  agent,
  user,
  text: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(limits.textChars)),
  tags: Schema.optional(
    Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(limits.tagChars))).pipe(Schema.maxItems(limits.tags)),
  ),
  /** Where it came from (a session, a URL...): free text. */
  source: Schema.optional(Schema.String.pipe(Schema.maxLength(limits.sourceChars))),
  /** Default `memory`. */
  kind: Schema.optional(Kind),
  /** Edit this document (its previous version goes to its history), or create it under this id. */
  id: Schema.optional(Id),
})

export const Search = Schema.Struct({
  op: Schema.Literal("search"),
  agent,
  user,
  query: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(limits.queryChars)),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, limits.maxSearchLimit))),
  kind: Schema.optional(Kind),
})

export const List = Schema.Struct({
  op: Schema.Literal("list"),
  agent,
  user,
  /** The `nextCursor` of the previous page (opaque); absent: the most recently created first. */
  cursor: Schema.optional(Schema.String.pipe(Schema.maxLength(32))),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, limits.maxPageLimit))),
  kind: Schema.optional(Kind),
})

const ById = <Op extends string>(op: Op) => Schema.Struct({ op: Schema.Literal(op), agent, user, id: Id })

export const Request = Schema.Union(Remember, Search, ById("read"), List, ById("history"), ById("forget")).annotations({
  identifier: "MemoryRequest",
  description: "ctx.v1.memory.<tenant> request",
})
export type Request = typeof Request.Type

/** A search hit. `kind` is a string here so that later kinds do not break old clients. */
export const Hit = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
  kind: Schema.String,
  tags: Schema.Array(Schema.String),
  /** In [0, 1); higher is better; compares hits of one search. */
  score: Schema.Number,
  updatedAt: Schema.String,
}).annotations({ identifier: "MemoryHit" })
export type Hit = typeof Hit.Type

export const Document = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  text: Schema.String,
  tags: Schema.Array(Schema.String),
  source: Schema.optional(Schema.String),
  /** Absent for the agent's shared documents. */
  user: Schema.optional(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  version: Schema.Number,
}).annotations({ identifier: "MemoryDocument" })
export type Document = typeof Document.Type

export const Version = Schema.Struct({
  version: Schema.Number,
  text: Schema.String,
  tags: Schema.Array(Schema.String),
  source: Schema.optional(Schema.String),
  at: Schema.String,
}).annotations({ identifier: "MemoryVersion" })
export type Version = typeof Version.Type

export const Reply = Schema.Struct({
  ok: Schema.Literal(true),
  /** `remember`: the document's id, its version (1 when created) and whether it was created. */
  id: Schema.optional(Schema.String),
  version: Schema.optional(Schema.Number),
  created: Schema.optional(Schema.Boolean),
  /** `search`: the hits, best first. */
  results: Schema.optional(Schema.Array(Hit)),
  /** `read`: the document (absent when there is none the scope sees). */
  document: Schema.optional(Document),
  /** `list`: one page, the most recently created first. */
  documents: Schema.optional(Schema.Array(Document)),
  /** `list`: present when there are more; send it as `cursor`. */
  nextCursor: Schema.optional(Schema.String),
  /** `history`: the versions, newest (the current one) first; absent when there is no such document. */
  versions: Schema.optional(Schema.Array(Version)),
  /** `forget`: whether a document was removed. */
  forgotten: Schema.optional(Schema.Boolean),
  /** True when `results`, `documents` or `versions` were cut to fit the reply's byte cap. */
  truncated: Schema.optional(Schema.Boolean),
}).annotations({ identifier: "MemoryReply", description: "ctx.v1.memory.<tenant> success reply" })
export type Reply = typeof Reply.Type

/** The agent named when a request names none. */
export const DEFAULT_AGENT = "default"
