/**
 * The shell's per-turn work on a request before the stages run, in process,
 * on the end-to-end bench's request (the tau-bench airline system prompt
 * and tools, two new messages, Chat Completions): what it was before issue
 * 18 — check and decode the whole request, hash its re-serialized JSON,
 * normalize it, count system and tools — against now, where system and
 * tools seen before come from the prefix cache as the same objects (one
 * hash each, the counts remembered by identity; or, as the session sent
 * them last, found in the request's text and not parsed at all), and
 * against a turn that names them by ref. Interleaved, one iteration of each at a time, so a
 * loaded machine's drift hits all three alike.
 */
import { Decode, Prefixes } from "@ctxd/assembler"
import { Normalize } from "@ctxd/context"
import { LocalCounter } from "@ctxd/tokens"
import { Workloads } from "@ctxd/testing"
import { Effect, Either } from "effect"
import { createHash } from "node:crypto"
import { quantile, round, type Row } from "./Stats.ts"

export const run = (iterations = 3_000): Promise<Row[]> => {
  const tau = Workloads.tauBenchSessions(Workloads.fullDataDir())[0]!
  const counter = LocalCounter.make({ backend: "tiktoken", preload: ["o200k_base"] })
  const encoder = new TextEncoder()
  const ids = { tenant: "bench", session: "s1" }
  const body = (turn: number, parts: Record<string, unknown> = {}) =>
    encoder.encode(
      JSON.stringify({
        turnId: `t${turn}`,
        format: "openai",
        model: { provider: "openai", name: "gpt-4o" },
        system: tau.system,
        tools: tau.tools,
        messages: [
          { role: "assistant", content: `answer ${turn}` },
          { role: "user", content: `turn ${turn}: please change my flight` },
        ],
        ...parts,
      }),
    )
  const count = (normalized: Normalize.NormalizedRequest) =>
    counter.countSystem(normalized.system, "o200k_base") + counter.countTools(normalized.tools, "o200k_base")

  /** Before issue 18: every turn checked, decoded, hashed and normalized in full; counts from the segment cache. */
  const before = (data: Uint8Array) => {
    const request = Effect.runSync(Decode.parseJson(data).pipe(Effect.flatMap(Decode.turnRequest)))
    createHash("sha256").update(JSON.stringify(request)).digest("hex")
    return count(Normalize.request(request))
  }
  const prefixes = Prefixes.make({ bytes: Prefixes.defaults.bytes, sessionRefs: 16 })
  const now = (data: Uint8Array, who = ids) => {
    const decoded = Decode.turn(data, prefixes, who)
    if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
    return count(Decode.normalized(decoded.right, () => [], undefined))
  }
  // the first turn: in full, then the session may name the parts by ref
  const first = Decode.turn(body(0), prefixes, ids)
  if (Either.isLeft(first)) throw new Error(first.left.message)
  const refs = Decode.refs(first.right)!
  prefixes.remember(ids.tenant, ids.session, refs, "openai")
  // a session that never sent them: its parts are found by their hash
  const other = { tenant: "bench", session: "s2" }
  const byRef = (turn: number) => body(turn, { system: { ref: refs.system }, tools: { ref: refs.tools } })

  const times = { before: [] as number[], hashed: [] as number[], now: [] as number[], ref: [] as number[] }
  for (let i = 1; i <= iterations; i++) {
    const full = body(i)
    const small = byRef(i)
    let t = performance.now()
    before(full)
    times.before.push(performance.now() - t)
    t = performance.now()
    now(full, other)
    times.hashed.push(performance.now() - t)
    t = performance.now()
    now(full)
    times.now.push(performance.now() - t)
    t = performance.now()
    now(small)
    times.ref.push(performance.now() - t)
  }
  const us = (values: ReadonlyArray<number>) => round(1000 * quantile(values, 0.5), 1)
  return Promise.resolve([
    {
      bench: "decode (e2e request)",
      metric: "per turn p50, before issue 18 (check, decode, hash, normalize, count all)",
      value: us(times.before),
      unit: "µs",
    },
    {
      bench: "decode (e2e request)",
      metric: "per turn p50, system and tools from the prefix cache by their hash",
      value: us(times.hashed),
      unit: "µs",
    },
    {
      bench: "decode (e2e request)",
      metric: "per turn p50, system and tools found in the text as the session sent them last",
      value: us(times.now),
      unit: "µs",
    },
    { bench: "decode (e2e request)", metric: "per turn p50, system and tools by ref", value: us(times.ref), unit: "µs" },
    { bench: "decode (e2e request)", metric: "request bytes in full / by ref", value: body(1).length, unit: `B / ${byRef(1).length} B` },
  ])
}
