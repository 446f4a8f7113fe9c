/**
 * The UTF-8 JSON of a turn's reply, the bytes of what `JSON.stringify`
 * writes, with the parts of the request body that arrive unchanged turn
 * after turn written once (issue 18).
 *
 * A renderer renders a stored message, a tool result or a tool once per
 * source object (`once`): the rendered part is frozen and the same object
 * every turn that sends it (the stored history and the cached tools live
 * across turns). `utf8` writes the elements of the body's arrays
 * (`messages`, `tools`, `input`, `contents`) that are frozen from a cache of
 * their JSON text and its UTF-8 length, kept per object, and everything
 * else with `JSON.stringify`, into one buffer of the reply's length: the
 * bytes are those of `JSON.stringify(reply)`, in a tenth of its time for a
 * long history, and in a third of the time it took to join the reply's
 * text by parts and encode it whole, as this module did before (a 19 KB
 * tau-bench reply: ~20 against ~60 µs in a loop).
 *
 * Only frozen parts are cached, so a part some code could still change is
 * written anew each time; the parts `once` makes are frozen whole, except
 * the objects they share with their source (a tool's argument schema),
 * which nothing changes: the neutral form is never mutated.
 */

type Json = Record<string, unknown>

/** Rendered parts by source object, per renderer (a source renders differently in each format). */
export type Memo = WeakMap<object, Json>

/** A memo for one renderer. */
export const memo = (): Memo => new WeakMap<object, Json>()

const freezeDeep = (value: unknown, shared: unknown): void => {
  if (typeof value !== "object" || value === null || value === shared || Object.isFrozen(value)) return
  Object.freeze(value)
  for (const v of Array.isArray(value) ? value : Object.values(value)) freezeDeep(v, shared)
}

/**
 * The part rendered from `source` (by `render`, on first use), frozen:
 * `shared` names an object of the source the part holds as it is (left
 * unfrozen: it belongs to the source).
 */
export const once = (memo: Memo, source: object, render: () => Json, shared?: unknown): Json => {
  let part = memo.get(source)
  if (part === undefined) {
    part = render()
    freezeDeep(part, shared)
    memo.set(source, part)
  }
  return part
}

/** A frozen part's JSON text and the length of its UTF-8. */
interface Part {
  readonly text: string
  readonly length: number
}

/** The JSON of each frozen part, by part (written into each reply that sends it, never encoded anew). */
const parts = new WeakMap<object, Part>()

const partOf = (value: object): Part => {
  let part = parts.get(value)
  if (part === undefined) {
    const text = JSON.stringify(value)
    part = { text, length: Buffer.byteLength(text, "utf8") }
    parts.set(value, part)
  }
  return part
}

/** A reply being written: the text between the frozen parts, by stretch, and the parts; the UTF-8 length of it all. */
interface Out {
  readonly pieces: Array<string | Part>
  text: string
  length: number
}

/** Ends the stretch of text written since the last part. */
const flush = (out: Out): void => {
  if (out.text === "") return
  out.pieces.push(out.text)
  out.length += Buffer.byteLength(out.text, "utf8")
  out.text = ""
}

const element = (out: Out, value: unknown): void => {
  if (typeof value === "object" && value !== null && Object.isFrozen(value)) {
    flush(out)
    const part = partOf(value)
    out.pieces.push(part)
    out.length += part.length
  } else {
    // what JSON.stringify writes for an array element it cannot write
    out.text += JSON.stringify(value) ?? "null"
  }
}

const array = (out: Out, values: ReadonlyArray<unknown>): void => {
  out.text += "["
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out.text += ","
    element(out, values[i])
  }
  out.text += "]"
}

const isPlain = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as { toJSON?: unknown }).toJSON !== "function"

/**
 * Writes an object's member: `prefix` (the comma and the key) then the value `v` of `key`;
 * false, nothing written, where `JSON.stringify` leaves the key out.
 */
type Write = (out: Out, key: string, prefix: string, v: unknown) => boolean

/** The member as `JSON.stringify` writes it. */
const plain: Write = (out, _key, prefix, v) => {
  const text = JSON.stringify(v) as string | undefined
  if (text === undefined) return false
  out.text += prefix + text
  return true
}

const object = (out: Out, value: Json, write: Write): void => {
  out.text += "{"
  let first = true
  for (const key of Object.keys(value)) {
    if (write(out, key, `${first ? "" : ","}${JSON.stringify(key)}:`, value[key])) first = false
  }
  out.text += "}"
}

/** A request body's value: its arrays by {@link array}, the rest by `JSON.stringify`. */
const writeBody: Write = (out, key, prefix, v) => {
  if (!Array.isArray(v)) return plain(out, key, prefix, v)
  out.text += prefix
  array(out, v)
  return true
}

/** A reply's member: its `request` body by {@link writeBody}, the rest by `JSON.stringify`. */
const writeReply: Write = (out, key, prefix, v) => {
  if (key !== "request" || !isPlain(v)) return plain(out, key, prefix, v)
  out.text += prefix
  object(out, v, writeBody)
  return true
}

/**
 * The UTF-8 of `JSON.stringify(reply)`, the same bytes: the reply's
 * `request` body written by parts (see the module doc). For any other
 * value, `JSON.stringify`'s.
 */
export const utf8 = (reply: unknown): Buffer => {
  if (!(isPlain(reply) && isPlain(reply["request"]))) return Buffer.from(JSON.stringify(reply), "utf8")
  const out: Out = { pieces: [], text: "", length: 0 }
  object(out, reply, writeReply)
  flush(out)
  // one buffer, each piece written into it: a part's ASCII text copied as it is, any other encoded
  const bytes = Buffer.allocUnsafe(out.length)
  let at = 0
  for (const piece of out.pieces) {
    if (typeof piece === "string") at += bytes.write(piece, at, "utf8")
    else at += bytes.write(piece.text, at, piece.length === piece.text.length ? "latin1" : "utf8")
  }
  return bytes
}
