// A baseline service for `npm run bench -- e2e`: answers every request on
// `<BENCH_ROOT>.v1.turn.>` with the bytes of `BENCH_REPLY_FILE` (one of
// ctxd's replies to the same requests), or else with a filler reply of
// `BENCH_REPLY_BYTES` bytes, parsing the request as JSON first, as any
// service on the wire contract would. With BENCH_PG=1 it also
// inserts the reply into Postgres in a transaction before answering (the
// floor any design with a durable history pays; the column compressed with
// lz4, the cheapest Postgres has, where the server has it): `DATABASE_URL`,
// `BENCH_SCHEMA`. Prints "echo ready" once subscribed; SIGTERM drains.
import { connect } from "@nats-io/transport-node"
import { readFileSync } from "node:fs"
import pg from "pg"

const root = process.env.BENCH_ROOT!
const replyBytes = Number(process.env.BENCH_REPLY_BYTES ?? "22000")
const withPg = process.env.BENCH_PG === "1"
const nc = await connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", name: `bench-echo${withPg ? "-pg" : ""}` })
const pool = withPg
  ? new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10, options: `-c search_path=${process.env.BENCH_SCHEMA}` })
  : undefined
if (pool !== undefined) {
  await pool.query(
    "CREATE TABLE IF NOT EXISTS bench_echo (session text NOT NULL, turn_id text NOT NULL, reply bytea NOT NULL, PRIMARY KEY (session, turn_id))",
  )
  // lz4 where the server was built with it; otherwise the default (pglz)
  await pool.query("ALTER TABLE bench_echo ALTER COLUMN reply SET COMPRESSION lz4").catch(() => undefined)
}
const filler = "x".repeat(replyBytes)
const fixed = process.env.BENCH_REPLY_FILE === undefined ? undefined : new Uint8Array(readFileSync(process.env.BENCH_REPLY_FILE))
const encoder = new TextEncoder()

const answer = async (subject: string, data: Uint8Array): Promise<Uint8Array> => {
  const request = JSON.parse(new TextDecoder().decode(data)) as { turnId?: string }
  const reply =
    fixed ?? encoder.encode(JSON.stringify({ ok: true, turnId: request.turnId, body: filler.slice(0, Math.max(0, replyBytes - 60)) }))
  if (pool !== undefined) {
    const client = await pool.connect()
    try {
      await client.query("BEGIN")
      await client.query(
        "INSERT INTO bench_echo (session, turn_id, reply) VALUES ($1, $2, $3) ON CONFLICT (session, turn_id) DO UPDATE SET reply = EXCLUDED.reply",
        [subject, request.turnId ?? "", Buffer.from(reply)],
      )
      await client.query("COMMIT")
    } finally {
      client.release()
    }
  }
  return reply
}

nc.subscribe(`${root}.v1.turn.>`, {
  queue: "bench-echo",
  callback: (error, msg) => {
    if (error !== null) return
    answer(msg.subject, msg.data).then(
      (reply) => msg.respond(reply),
      (e: unknown) => msg.respond(encoder.encode(JSON.stringify({ ok: false, error: { code: "Internal", message: String(e) } }))),
    )
  },
})
await nc.flush()
console.log("echo ready")
process.on("SIGTERM", () => {
  void nc
    .drain()
    .then(() => pool?.end())
    .then(() => process.exit(0))
})
