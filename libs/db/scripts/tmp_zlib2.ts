import { Workloads } from "@ctxd/testing"
import zlib from "node:zlib"
const [tau] = Workloads.tauBenchSessions()
const all = Workloads.tauBenchSessions().flatMap((s) => s.turns.flatMap((t) => t.messages))
const reply = (n: number) => ({ ok: true, turnId: "t12", request: { model: "gpt-4o", messages: [{ role: "system", content: tau!.system }, ...all.slice(0, n)], tools: tau!.tools }, report: { tokens: { total: 12345, system: 1000, tools: 2000 }, kept: n, dropped: 0 } })
const json = JSON.stringify(reply(33))
const buf = Buffer.from(json)
console.log(`json ${buf.length} B`)
const C = zlib.constants
const cases: Array<[string, zlib.ZlibOptions]> = [
  ["l1", { level: 1 }], ["l1 m9", { level: 1, memLevel: 9 }], ["l1 w12", { level: 1, windowBits: 12 }], ["l2", { level: 2 }], ["l3", { level: 3 }], ["l4", { level: 4 }], ["l6", { level: 6 }],
  ["l1 rle", { level: 1, strategy: C.Z_RLE }], ["l1 huff", { level: 1, strategy: C.Z_HUFFMAN_ONLY }],
]
for (let round = 0; round < 3; round++) {
  for (const [label, o] of cases) {
    let out = zlib.deflateRawSync(json, o)
    const N = 3000
    const ts: number[] = []
    for (let i = 0; i < N; i++) { const t = performance.now(); out = zlib.deflateRawSync(json, o); ts.push(performance.now() - t) }
    ts.sort((a, b) => a - b)
    const t = performance.now(); for (let i = 0; i < 1000; i++) JSON.parse(zlib.inflateRawSync(out).toString()); const d = (performance.now() - t)
    console.log(`  ${label.padEnd(8)} ${String(out.length).padStart(6)} B  ratio ${(buf.length / out.length).toFixed(2)}  compress median ${(ts[N >> 1]! * 1000).toFixed(0)} µs min ${(ts[0]! * 1000).toFixed(0)} µs  inflate+parse ${d.toFixed(0)} µs`)
  }
  const t = performance.now(); for (let i = 0; i < 3000; i++) JSON.stringify(JSON.parse(json)); console.log(`  parse+stringify ${((performance.now() - t) / 3).toFixed(0)} µs`)
}
