import { Workloads } from "@ctxd/testing"
import zlib from "node:zlib"
const [tau] = Workloads.tauBenchSessions()
const all = Workloads.tauBenchSessions().flatMap((s) => s.turns.flatMap((t) => t.messages))
const reply = (n: number) => ({ ok: true, turnId: "t12", request: { model: "gpt-4o", messages: [{ role: "system", content: tau!.system }, ...all.slice(0, n)], tools: tau!.tools }, report: { tokens: { total: 12345, system: 1000, tools: 2000 }, kept: n, dropped: 0 } })
const json = JSON.stringify(reply(33))
const buf = Buffer.from(json)
const C = zlib.constants
const time = (label: string, f: () => Buffer | string, N = 3000) => {
  let out = f()
  const ts: number[] = []
  for (let i = 0; i < N; i++) { const t = performance.now(); out = f(); ts.push(performance.now() - t) }
  ts.sort((a, b) => a - b)
  console.log(`  ${label.padEnd(22)} ${String(out.length).padStart(6)} B  median ${(ts[N >> 1]! * 1000).toFixed(0)} µs  min ${(ts[0]! * 1000).toFixed(0)} µs`)
  return out
}
console.log(`json ${buf.length} B`)
time("deflate l1 tiny", () => zlib.deflateRawSync("hello world", { level: 1 }))
time("deflate l1 str", () => zlib.deflateRawSync(json, { level: 1 }))
time("deflate l1 buf", () => zlib.deflateRawSync(buf, { level: 1 }))
time("Buffer.from", () => Buffer.from(json))
time("stringify", () => JSON.stringify(reply(33)))
const z = zlib as any
if (z.zstdCompressSync) {
  time("zstd tiny", () => z.zstdCompressSync("hello world", { params: { [C.ZSTD_c_compressionLevel]: 1 } }))
  for (const l of [-5, -3, -1, 1, 2, 3]) {
    const out = time(`zstd ${l}`, () => z.zstdCompressSync(buf, { params: { [C.ZSTD_c_compressionLevel]: l } }))
    time(`  unzstd ${l}`, () => z.zstdDecompressSync(out))
  }
}
for (const q of [0, 1, 2]) time(`brotli q${q}`, () => zlib.brotliCompressSync(buf, { params: { [C.BROTLI_PARAM_QUALITY]: q, [C.BROTLI_PARAM_MODE]: C.BROTLI_MODE_TEXT, [C.BROTLI_PARAM_SIZE_HINT]: buf.length } }))
const out1 = time("deflate l1", () => zlib.deflateRawSync(buf, { level: 1 }))
time("inflate", () => zlib.inflateRawSync(out1))
time("inflate+toString", () => zlib.inflateRawSync(out1).toString("utf8"))
