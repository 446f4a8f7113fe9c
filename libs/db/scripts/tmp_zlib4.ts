import { Workloads } from "@ctxd/testing"
import zlib from "node:zlib"
const sessions = Workloads.tauBenchSessions()
const [tau] = sessions
const all = sessions.flatMap((s) => s.turns.flatMap((t) => t.messages))
const reply = (k: number, n: number) => ({ ok: true, turnId: "t12", request: { model: "gpt-4o", messages: [{ role: "system", content: tau!.system }, ...all.slice(k, k + n)], tools: tau!.tools }, report: { tokens: { total: 12345, system: 1000, tools: 2000 }, kept: n, dropped: 0 } })
// 50 different replies of ~30 KB so caches do not flatter
const jsons = Array.from({ length: 50 }, (_, i) => JSON.stringify(reply(i * 37, 33)))
const bufs = jsons.map((j) => Buffer.from(j))
const avg = bufs.reduce((s, b) => s + b.length, 0) / bufs.length
console.log(`replies avg ${avg.toFixed(0)} B`)
const C = zlib.constants
const z = zlib as any
const codecs: Array<[string, (b: Buffer) => Buffer, (b: Buffer) => Buffer]> = [
  ["deflateRaw l1", (b) => zlib.deflateRawSync(b, { level: 1 }), (b) => zlib.inflateRawSync(b)],
  ["deflateRaw l2", (b) => zlib.deflateRawSync(b, { level: 2 }), (b) => zlib.inflateRawSync(b)],
  ["deflateRaw l3", (b) => zlib.deflateRawSync(b, { level: 3 }), (b) => zlib.inflateRawSync(b)],
  ["deflateRaw l6", (b) => zlib.deflateRawSync(b, { level: 6 }), (b) => zlib.inflateRawSync(b)],
  ["brotli q0", (b) => zlib.brotliCompressSync(b, { params: { [C.BROTLI_PARAM_QUALITY]: 0, [C.BROTLI_PARAM_SIZE_HINT]: b.length } }), (b) => zlib.brotliDecompressSync(b)],
  ["brotli q1", (b) => zlib.brotliCompressSync(b, { params: { [C.BROTLI_PARAM_QUALITY]: 1, [C.BROTLI_PARAM_SIZE_HINT]: b.length } }), (b) => zlib.brotliDecompressSync(b)],
  ["zstd 1", (b) => z.zstdCompressSync(b, { params: { [C.ZSTD_c_compressionLevel]: 1 } }), (b) => z.zstdDecompressSync(b)],
]
const res: Record<string, { c: number[]; d: number[]; size: number }> = {}
for (let round = 0; round < 20; round++) {
  for (const [label, comp, dec] of codecs) {
    const r = (res[label] ??= { c: [], d: [], size: 0 })
    let size = 0
    const outs: Buffer[] = []
    let t = performance.now()
    for (const b of bufs) { const o = comp(b); outs.push(o); size += o.length }
    r.c.push((performance.now() - t) / bufs.length)
    t = performance.now()
    for (const o of outs) dec(o)
    r.d.push((performance.now() - t) / bufs.length)
    r.size = size / bufs.length
  }
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!
for (const [label] of codecs) {
  const r = res[label]!
  console.log(`${label.padEnd(14)} ${r.size.toFixed(0).padStart(6)} B ratio ${(avg / r.size).toFixed(2)}  compress ${(med(r.c) * 1000).toFixed(0)} µs  decompress ${(med(r.d) * 1000).toFixed(0)} µs`)
}
let t = performance.now(); for (let k = 0; k < 20; k++) for (const j of jsons) Buffer.from(j); console.log(`Buffer.from ${((performance.now() - t) / 1000 * 1000).toFixed(0)} µs`)
t = performance.now(); for (let k = 0; k < 20; k++) for (const j of jsons) zlib.deflateRawSync(j, { level: 1 }); console.log(`deflateRaw l1 from string ${((performance.now() - t) / 1000 * 1000).toFixed(0)} µs`)
t = performance.now(); for (let k = 0; k < 20; k++) for (const j of jsons) zlib.brotliCompressSync(j, { params: { [C.BROTLI_PARAM_QUALITY]: 0 } }); console.log(`brotli q0 from string ${((performance.now() - t) / 1000 * 1000).toFixed(0)} µs`)
