/**
 * `ctxd inspect <tenant> <session> [--turn ID] [--json]`: what was stored and
 * what was sent for one turn (default the session's newest), read from
 * Postgres (`DATABASE_URL`, `CTXD_DB_SCHEMA`) through `SessionStore`: the
 * session's latest turns, the messages the turn appended, and its reply —
 * the report (its cache miss, `report.cache.miss`, first in one line) and the
 * provider request body. Exit 1 when the session or turn
 * is not stored or the database cannot be read.
 */
import { Database, SessionStore } from "@ctxd/db"
import { Cause, Effect, Layer, Option } from "effect"

/** Turns listed around the inspected one. */
const LISTED = 10

export interface Input {
  readonly tenant: string
  readonly session: string
  readonly turnId: string | undefined
  readonly json: boolean
}

const inspect = (input: Input) =>
  Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    const turns = yield* store.listTurns(input.tenant, input.session, LISTED)
    const turnId = input.turnId ?? turns[0]?.turnId
    if (turnId === undefined)
      return {
        _tag: "Missing" as const,
        what: `no session ${input.tenant}/${input.session} is stored (check the tenant, the session and CTXD_DB_SCHEMA)`,
      }
    const turn = yield* store.findTurn(input.tenant, input.session, turnId)
    if (Option.isNone(turn))
      return {
        _tag: "Missing" as const,
        what: `session ${input.tenant}/${input.session} has no turn ${JSON.stringify(turnId)}; its latest: ${turns.map((t) => t.turnId).join(", ") || "none"}`,
      }
    const { firstSeq, lastSeq, reply } = turn.value
    const stored = (yield* store.loadMessages(input.tenant, input.session, firstSeq - 1)).filter((m) => m.seq <= lastSeq)
    return { _tag: "Found" as const, turnId, turns, stored, reply: reply as { readonly request?: unknown; readonly report?: unknown } }
  })

/** The turn's cache miss (`report.cache.miss`), in one line: tokens, cause and reason (none: no line). */
const missLine = (report: unknown): ReadonlyArray<string> => {
  const miss = (report as { readonly cache?: { readonly miss?: { cause?: unknown; tokens?: unknown; reason?: unknown } } } | undefined)
    ?.cache?.miss
  if (miss === undefined || typeof miss.tokens !== "number") return []
  const reason = typeof miss.reason === "string" ? ` (${miss.reason})` : ""
  return ["", `cache miss: ${miss.tokens.toLocaleString("en-US")} tokens of the previous prompt not read: ${String(miss.cause)}${reason}`]
}

/** Runs the command; the exit code. */
export const run = async (input: Input): Promise<number> => {
  const database = Layer.unwrapEffect(Effect.map(Database.config, (options) => Database.layer({ ...options, poolMax: 1 })))
  const exit = await Effect.runPromiseExit(inspect(input).pipe(Effect.provide(SessionStore.layer.pipe(Layer.provide(database)))))
  if (exit._tag === "Failure") {
    const message = Option.match(Cause.failureOption(exit.cause), {
      onNone: () => Cause.pretty(exit.cause),
      onSome: (error) => String((error as { readonly message?: unknown }).message ?? error),
    })
    process.stderr.write(
      `ctxd inspect: cannot read the session store: ${message}\nset DATABASE_URL (and CTXD_DB_SCHEMA if the worker uses one) to the worker's database\n`,
    )
    return 1
  }
  const found = exit.value
  if (found._tag === "Missing") {
    process.stderr.write(`ctxd inspect: ${found.what}\n`)
    return 1
  }
  if (input.json) {
    process.stdout.write(
      `${JSON.stringify({ tenant: input.tenant, session: input.session, turnId: found.turnId, latestTurns: found.turns, stored: found.stored, report: found.reply.report, request: found.reply.request }, null, 1)}\n`,
    )
    return 0
  }
  const out = [
    `session ${input.tenant}/${input.session}, latest turns (newest first): ${found.turns.map((t) => `${t.turnId} (seq ${t.firstSeq}–${t.lastSeq}, ${t.createdAt.toISOString()})`).join(", ")}`,
    "",
    `turn ${found.turnId}: stored ${found.stored.length} message(s)`,
    ...found.stored.map(
      (m) => `  #${m.seq} ${m.message.role} (${m.tokens} tok ${m.encoding}): ${m.message.parts.map((p) => p.type).join(", ")}`,
    ),
    ...missLine(found.reply.report),
    "",
    "report:",
    JSON.stringify(found.reply.report, null, 2),
    "",
    "request body sent:",
    JSON.stringify(found.reply.request, null, 2),
  ]
  process.stdout.write(`${out.join("\n")}\n`)
  return 0
}
