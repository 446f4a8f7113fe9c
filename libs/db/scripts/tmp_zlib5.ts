import { Workloads } from "@ctxd/testing"
import zlib from "node:zlib"
const sessions = Workloads.tauBenchSessions()
const [tau] = sessions
const all = sessions.flatMap((s) => s.turns.flatMap((t) => t.messages))
const reply = (k: number, n: number) => ({ ok: true, turnId: "t12", request: { model: "gpt-4o", messages: [{ role: "system", content: tau!.system }, ...all.slice(k, k + n)], tools: tau!.tools }, report: { tokens: { total: 12345, system: 1000, tools: 2000 }, kept: n, dropped: 0 } })
const bufs = Array.from({ length: 50 }, (_, i) => Buffer.from(JSON.stringify(reply(i * 37, 33))))
const C = zlib.constants
const variants: Array<[string, (b: Buffer) => zlib.BrotliOptions]> = [
  ["q0", () => ({ params: { [C.BROTLI_PARAM_QUALITY]: 0 } })],
  ["q0 hint", (b) => ({ params: { [C.BROTLI_PARAM_QUALITY]: 0, [C.BROTLI_PARAM_SIZE_HINT]: b.length } })],
  ["q0 text", (b) => ({ params: { [C.BROTLI_PARAM_QUALITY]: 0, [C.BROTLI_PARAM_MODE]: C.BROTLI_MODE_TEXT, [C.BROTLI_PARAM_SIZE_HINT]: b.length } })],
  ["q0 lgwin16", () => ({ params: { [C.BROTLI_PARAM_QUALITY]: 0, [C.BROTLI_PARAM_LGWIN]: 16 } })],
  ["q1 lgwin16", () => ({ params: { [C.BROTLI_PARAM_QUALITY]: 1, [C.BROTLI_PARAM_LGWIN]: 16 } })],
  ["q2", () => ({ params: { [C.BROTLI_PARAM_QUALITY]: 2 } })],
  ["deflate1", () => ({})],
]
const res: Record<string, number[]> = {}
const size: Record<string, number> = {}
for (let round = 0; round < 20; round++) for (const [label, opts] of variants) {
  let s = 0
  const t = performance.now()
  for (const b of bufs) s += (label === "deflate1" ? zlib.deflateRawSync(b, { level: 1 }) : zlib.brotliCompressSync(b, opts(b))).length
  ;(res[label] ??= []).push((performance.now() - t) / bufs.length)
  size[label] = s / bufs.length
}
for (const [label] of variants) console.log(label.padEnd(12), size[label]!.toFixed(0), (([...res[label]!].sort((a, b) => a - b)[10]!) * 1000).toFixed(0), "µs")
