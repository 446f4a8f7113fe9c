import { Workloads } from "@ctxd/testing"
import zlib from "node:zlib"
const [tau] = Workloads.tauBenchSessions()
const msgs = tau!.turns.flatMap((t) => t.messages)
const all = Workloads.tauBenchSessions().flatMap((s) => s.turns.flatMap((t) => t.messages))
console.log("sessions", Workloads.tauBenchSessions().length, "msgs in first", msgs.length)
const reply = (n: number) => ({ ok: true, turnId: "t12", request: { model: "gpt-4o", messages: [{ role: "system", content: tau!.system }, ...all.slice(0, n)], tools: tau!.tools }, report: { tokens: { total: 12345, system: 1000, tools: 2000 }, kept: n, dropped: 0 } })
for (const n of [10, 30, 60]) {
  const json = JSON.stringify(reply(n))
  const buf = Buffer.from(json)
  console.log(`n=${n} json ${buf.length} B`)
  const bench = (label: string, f: () => Buffer, inv: (b: Buffer) => Buffer) => {
    let out = f()
    for (let i = 0; i < 200; i++) out = f()
    const N = 2000
    let t = performance.now()
    for (let i = 0; i < N; i++) out = f()
    const c = (performance.now() - t) / N
    t = performance.now()
    for (let i = 0; i < N; i++) inv(out)
    const d = (performance.now() - t) / N
    console.log(`  ${label.padEnd(12)} ${String(out.length).padStart(6)} B  ratio ${(buf.length / out.length).toFixed(2)}  compress ${(c * 1000).toFixed(0)} µs  inflate ${(d * 1000).toFixed(0)} µs`)
  }
  for (const level of [1, 3, 6, 9]) bench(`deflate ${level}`, () => zlib.deflateRawSync(json, { level }), (b) => zlib.inflateRawSync(b))
  bench("deflate1 mem9", () => zlib.deflateRawSync(json, { level: 1, memLevel: 9 }), (b) => zlib.inflateRawSync(b))
  if ((zlib as any).zstdCompressSync) for (const l of [1, 3]) bench(`zstd ${l}`, () => (zlib as any).zstdCompressSync(json, { params: { [zlib.constants.ZSTD_c_compressionLevel]: l } }), (b) => (zlib as any).zstdDecompressSync(b))
  bench("brotli 1", () => zlib.brotliCompressSync(json, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } }), (b) => zlib.brotliDecompressSync(b))
  let t = performance.now(); for (let i = 0; i < 2000; i++) JSON.stringify(reply(n)); console.log(`  stringify ${((performance.now() - t) / 2 ).toFixed(0)} µs (incl build)`)
  t = performance.now(); for (let i = 0; i < 2000; i++) Buffer.from(json); console.log(`  Buffer.from ${((performance.now() - t) / 2 ).toFixed(0)} µs`)
}
