/**
 * How a turn's reply is stored in `ctxd_turns.reply_z`: one codec byte, then
 * the reply's UTF-8 JSON compressed by that codec. Only brotli at quality 0
 * is written: on ~28 KB provider request bodies it compresses ~3.8× in
 * ~90 µs, where raw deflate at level 1 takes ~185 µs for ~3.9× (and zstd,
 * experimental in Node 24, ~115 µs for ~4×). The byte lets a later release
 * switch codecs without a migration.
 *
 * Read, not written: codec 0, the UTF-8 JSON as it is, for a column
 * Postgres compresses with lz4. Writing it was measured in the end-to-end
 * bench (issue 18) and not kept: no gain in the worker's or the machine's
 * CPU per turn, ~3.5× the bytes sent to Postgres per commit, the same disk.
 * It stays readable so that a release which does write it needs no
 * two-step rollout (a worker must read a codec before any worker writes
 * it, or a retried turn could reach one that cannot read its stored reply).
 */
import { brotliCompressSync, brotliDecompressSync, constants } from "node:zlib"

const RAW = 0
const BROTLI = 1

/** The same bytes as a Buffer (no copy), for its UTF-8 decoding and search. */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * The output buffer zlib writes into: its default is 16 KB whatever the input, most of it unused
 * for a ~5 KB compressed reply and kept until the buffer is collected (in a loaded worker, at a
 * mark-compact). Sized for the ~3× Brotli makes of JSON at quality 0, so one buffer holds the
 * usual reply; one that compresses worse gets more buffers, joined (exact either way).
 */
export const chunkFor = (length: number): number => Math.max(1024, Math.ceil(length / 2))

/** The stored form of `json` (the reply's JSON text, or its UTF-8 bytes). */
export const encode = (json: string | Uint8Array): Buffer => {
  const body = brotliCompressSync(json, {
    chunkSize: chunkFor(json.length),
    params: { [constants.BROTLI_PARAM_QUALITY]: 0, [constants.BROTLI_PARAM_SIZE_HINT]: json.length },
  })
  const stored = Buffer.allocUnsafe(body.length + 1)
  stored[0] = BROTLI
  body.copy(stored, 1)
  return stored
}

/** The reply {@link encode} stored (or one stored raw, codec 0); throws on an unknown codec or corrupt data. */
export const decode = (stored: Uint8Array): unknown => {
  const codec = stored[0]
  const body = asBuffer(stored).subarray(1)
  if (codec === RAW) return JSON.parse(body.toString("utf8"))
  if (codec !== BROTLI) throw new Error(`unknown reply codec ${String(codec)}`)
  return JSON.parse(brotliDecompressSync(body).toString("utf8"))
}

// JSON.stringify writes U+0000 as the escape \u0000, after an even number of
// backslashes (none, or escaped backslashes of the text before it).
const NUL_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\u0000/

/**
 * True if the JSON text (or its UTF-8 bytes) holds U+0000, which Postgres text and jsonb cannot
 * hold: the v1 store (reply as jsonb) rejected such replies, and so does this one.
 */
export const hasNul = (json: string | Uint8Array): boolean => {
  if (typeof json === "string") return json.includes("\\u0000") && NUL_ESCAPE.test(json)
  const bytes = asBuffer(json)
  return bytes.includes("\\u0000") && NUL_ESCAPE.test(bytes.toString("utf8"))
}
