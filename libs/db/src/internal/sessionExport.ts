/**
 * A session's export (`LifecycleStore.exportPage`): its JSON Lines section by
 * section (the session, its messages, turns, summaries, compactions), paged
 * by an opaque cursor that names the session's id, the section and the last
 * key. Apart from `LifecycleStore.ts`, which keeps the writes (pruning and
 * deletion); `BadCursor` and `ExportPage` are re-exported from there.
 */
import { Effect } from "effect"
import type { DatabaseError, DatabaseUnavailable, Queryable } from "../Database.ts"

/**
 * A reply is still stored (reply_z, or a pre-v3 jsonb success): the predicate
 * of ctxd_turns_reply_kept. The export reports it per turn; the pruner in
 * `LifecycleStore` selects by it.
 */
export const KEPT = `(reply_z IS NOT NULL OR reply ->> 'ok' = 'true')`

/** One page of an export: JSON Lines and where to continue. */
export interface ExportPage {
  readonly lines: string
  readonly nextCursor?: string | undefined
}

/** The export's sections, in order. */
const SECTIONS = ["session", "message", "turn", "summary", "compaction"] as const
type Section = (typeof SECTIONS)[number]

/** Where an export continues: the session's id (a deleted and restarted session is another), the section, the last key. */
interface Cursor {
  readonly s: string
  readonly k: Section
  readonly a: number | readonly [number, string]
}

/** The cursor is not one this store wrote, or its session has been deleted (and maybe started anew) since. */
export class BadCursor extends Error {
  readonly _tag = "BadCursor"
}

const encodeCursor = (cursor: Cursor): string => Buffer.from(JSON.stringify(cursor)).toString("base64url")

const decodeCursor = (text: string): Cursor | undefined => {
  try {
    const value = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as Cursor
    const after = value.a
    const okAfter =
      typeof after === "number" ||
      (Array.isArray(after) && after.length === 2 && typeof after[0] === "number" && typeof after[1] === "string")
    return typeof value.s === "string" && /^[0-9]+$/.test(value.s) && SECTIONS.includes(value.k) && okAfter ? value : undefined
  } catch {
    return undefined
  }
}

/** Rows read per query while filling a page (a page's bytes are bounded; rows may be large). */
const CHUNK = 100

type Row = Record<string, unknown>

/** The rows of `section` after `after`, at most `limit`, with the key of each and its line. */
const readSection = (db: Queryable, id: string, section: Exclude<Section, "session">, after: Cursor["a"], limit: number) => {
  switch (section) {
    case "message":
      return Effect.map(
        db.query<Row>(
          `SELECT seq, role, content, tokens, encoding, turn_id, created_at FROM ctxd_messages
           WHERE session_id = $1::bigint AND seq > $2 ORDER BY seq LIMIT $3`,
          [id, after as number, limit],
        ),
        ({ rows }) =>
          rows.map((r) => ({
            key: r.seq as number,
            line: {
              kind: "message",
              seq: r.seq,
              role: r.role,
              message: r.content,
              tokens: r.tokens,
              encoding: r.encoding,
              turnId: r.turn_id,
              createdAt: r.created_at,
            },
          })),
      )
    case "turn": {
      const [seq, turnId] = typeof after === "number" ? [-1, ""] : after
      return Effect.map(
        db.query<Row>(
          `SELECT turn_id, request_hash, first_seq, last_seq, created_at, ${KEPT} AS reply_stored FROM ctxd_turns
           WHERE session_id = $1::bigint AND (last_seq, turn_id) > ($2::integer, $3::text)
           ORDER BY last_seq, turn_id LIMIT $4`,
          [id, seq, turnId, limit],
        ),
        ({ rows }) =>
          rows.map((r) => ({
            key: [r.last_seq as number, r.turn_id as string] as const,
            line: {
              kind: "turn",
              turnId: r.turn_id,
              firstSeq: r.first_seq,
              lastSeq: r.last_seq,
              requestHash: r.request_hash,
              replyStored: r.reply_stored,
              createdAt: r.created_at,
            },
          })),
      )
    }
    case "summary":
      return Effect.map(
        db.query<Row>(
          `SELECT id, covers_from_seq, covers_to_seq, text, mode, depth, snapshot, created_at FROM ctxd_summaries
           WHERE session_id = $1::bigint AND id > $2 ORDER BY id LIMIT $3`,
          [id, after as number, limit],
        ),
        ({ rows }) =>
          rows.map((r) => ({
            key: Number(r.id),
            line: {
              kind: "summary",
              id: Number(r.id),
              coversFromSeq: r.covers_from_seq,
              coversToSeq: r.covers_to_seq,
              text: r.text,
              mode: r.mode,
              depth: r.depth,
              snapshot: r.snapshot,
              createdAt: r.created_at,
            },
          })),
      )
    case "compaction":
      return Effect.map(
        db.query<Row>(
          `SELECT id, outcome, trigger, covers_from_seq, covers_to_seq, summary_id, summary, mode, depth, tokens_in, tokens_out,
                  model, duration_ms, detail, finished_at, created_at FROM ctxd_compactions
           WHERE session_id = $1::bigint AND id > $2 ORDER BY id LIMIT $3`,
          [id, after as number, limit],
        ),
        ({ rows }) =>
          rows.map((r) => ({
            key: Number(r.id),
            line: {
              kind: "compaction",
              id: Number(r.id),
              outcome: r.outcome,
              trigger: r.trigger,
              coversFromSeq: r.covers_from_seq,
              coversToSeq: r.covers_to_seq,
              summaryId: r.summary_id === null ? null : Number(r.summary_id),
              summary: r.summary,
              mode: r.mode,
              depth: r.depth,
              tokensIn: r.tokens_in,
              tokensOut: r.tokens_out,
              model: r.model,
              durationMs: r.duration_ms,
              detail: r.detail,
              finishedAt: r.finished_at,
              createdAt: r.created_at,
            },
          })),
      )
  }
}

/** `LifecycleStore.exportPage` (see there), without its failure log. */
export const page = (
  db: Queryable,
  tenant: string,
  session: string,
  cursor: string | undefined,
  limit: number,
  maxBytes: number,
): Effect.Effect<ExportPage, DatabaseUnavailable | DatabaseError | BadCursor> =>
  Effect.gen(function* () {
    const { rows } = yield* db.query<Row>(
      `SELECT id::text AS id, last_seq, created_at, updated_at,
              ARRAY(SELECT user_id FROM ctxd_session_users u WHERE u.session_id = s.id ORDER BY user_id) AS users
       FROM ctxd_sessions s WHERE tenant = $1 AND session = $2`,
      [tenant, session],
    )
    const head = rows[0]
    const from = cursor === undefined ? undefined : decodeCursor(cursor)
    if (cursor !== undefined && (from === undefined || head === undefined || from.s !== head.id)) {
      return yield* Effect.fail(new BadCursor("the cursor does not continue an export of this session (deleted since?)"))
    }
    if (head === undefined) return { lines: "" }
    const id = head.id as string
    const out: Array<string> = []
    let bytes = 0
    let section: Section = from?.k ?? "session"
    let after: Cursor["a"] = from?.a ?? 0
    /** Adds a line unless the page is full; false when full (the cursor then points before it). */
    const push = (line: unknown): boolean => {
      const text = JSON.stringify(line) + "\n"
      const size = Buffer.byteLength(text)
      if (out.length >= limit || (out.length > 0 && bytes + size > maxBytes)) return false
      out.push(text)
      bytes += size
      return true
    }
    const next = (): ExportPage => ({ lines: out.join(""), nextCursor: encodeCursor({ s: id, k: section, a: after }) })
    if (section === "session") {
      push({
        kind: "session",
        tenant,
        session,
        lastSeq: head.last_seq,
        users: head.users,
        createdAt: head.created_at,
        updatedAt: head.updated_at,
      })
      section = "message"
      after = 0
    }
    for (let at = SECTIONS.indexOf(section); at < SECTIONS.length; at++, after = 0) {
      const current = SECTIONS[at] as Exclude<Section, "session">
      section = current
      for (;;) {
        if (out.length >= limit) return next()
        const wanted = Math.min(CHUNK, limit - out.length)
        const chunk = yield* readSection(db, id, current, after, wanted)
        for (const row of chunk) {
          if (!push(row.line)) return next()
          after = row.key
        }
        if (chunk.length < wanted) break
      }
    }
    return { lines: out.join("") }
  })
