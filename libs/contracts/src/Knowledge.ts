/**
 * `<root>.v1.knowledge.<tenant>`: documents an agent may load on demand. The
 * prompt carries a compact index (id + one line each); the model loads a
 * document with ctxd's virtual `load_knowledge(id)` tool.
 */
import { Schema } from "effect"

const Id = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.:-]{1,128}$/, { message: () => "id must match [A-Za-z0-9_.:-]{1,128}" }))
/** The agent the documents belong to; default `default` (requests name theirs in `options.agent`). */
const Agent = Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/)))

export const Doc = Schema.Struct({
  id: Id,
  /** One line shown in the index (cut to 120 characters). */
  title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1_000)),
  /** The document, returned when the model loads it. */
  text: Schema.String.pipe(Schema.maxLength(1_000_000)),
}).annotations({ identifier: "KnowledgeDoc" })
export type Doc = typeof Doc.Type

/** Documents in one reply when a request names no `limit`. */
export const DEFAULT_PAGE = 100
/** Most documents one reply lists. */
export const MAX_PAGE = 1_000

export const Request = Schema.Union(
  Schema.Struct({ op: Schema.Literal("add"), agent: Agent, doc: Doc }),
  Schema.Struct({
    op: Schema.Literal("list"),
    agent: Agent,
    /** Where to continue: the `nextCursor` of the previous page (opaque). Absent = from the start. */
    cursor: Schema.optional(Id),
    /** Documents per page, 1 to 1,000; default 100. A page also stops at about 256 KB of titles. */
    limit: Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_PAGE))),
  }),
  Schema.Struct({ op: Schema.Literal("remove"), agent: Agent, id: Id }),
).annotations({ identifier: "KnowledgeRequest", description: "ctx.v1.knowledge.<tenant> request" })
export type Request = typeof Request.Type

export const Reply = Schema.Struct({
  ok: Schema.Literal(true),
  /**
   * The agent's documents after the operation (id and title), by id: one page
   * (the first, for `add` and `remove`; see `nextCursor`).
   */
  docs: Schema.Array(Schema.Struct({ id: Schema.String, title: Schema.String })),
  /** Present when there are more documents: send `{op: "list", cursor: nextCursor}` for the next page. */
  nextCursor: Schema.optional(Schema.String),
  /** For `remove`: whether a document was removed. */
  removed: Schema.optional(Schema.Boolean),
}).annotations({ identifier: "KnowledgeReply", description: "ctx.v1.knowledge.<tenant> success reply" })
export type Reply = typeof Reply.Type

/** The agent name used when a request names none. */
export const DEFAULT_AGENT = "default"
