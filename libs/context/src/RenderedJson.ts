/**
 * The JSON text of a turn's reply, as `JSON.stringify` writes it, with the
 * parts of the request body that arrive unchanged turn after turn written
 * once (issue 18).
 *
 * A renderer renders a stored message, a tool result or a tool once per
 * source object (`once`): the rendered part is frozen and the same object
 * every turn that sends it (the stored history and the cached tools live
 * across turns). `stringify` writes the elements of the body's arrays
 * (`messages`, `tools`, `input`, `contents`) that are frozen from a cache of
 * their text, kept per object, and everything else with `JSON.stringify`:
 * the text is the same as `JSON.stringify(reply)`'s, in a tenth of the time
 * for a long history.
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

const texts = new WeakMap<object, string>()

const element = (value: unknown): string => {
  if (typeof value === "object" && value !== null && Object.isFrozen(value)) {
    let text = texts.get(value)
    if (text === undefined) {
      text = JSON.stringify(value)
      texts.set(value, text)
    }
    return text
  }
  // what JSON.stringify writes for an array element it cannot write
  return JSON.stringify(value) ?? "null"
}

const array = (values: ReadonlyArray<unknown>): string => {
  let out = "["
  for (let i = 0; i < values.length; i++) out += (i === 0 ? "" : ",") + element(values[i])
  return out + "]"
}

const isPlain = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as { toJSON?: unknown }).toJSON !== "function"

/** An object's text, each value written by `write` (undefined: the key left out, as `JSON.stringify` leaves it). */
const object = (value: Json, write: (key: string, v: unknown) => string | undefined): string => {
  let out = "{"
  let first = true
  for (const key of Object.keys(value)) {
    const text = write(key, value[key])
    if (text === undefined) continue
    out += `${first ? "" : ","}${JSON.stringify(key)}:${text}`
    first = false
  }
  return out + "}"
}

/** A request body's text: its array values written by {@link array}, the rest by `JSON.stringify`. */
const writeBody = (_key: string, v: unknown): string | undefined => (Array.isArray(v) ? array(v) : JSON.stringify(v))
const writeReply = (key: string, v: unknown): string | undefined =>
  key === "request" && isPlain(v) ? object(v, writeBody) : JSON.stringify(v)

/**
 * `JSON.stringify(reply)`, the same text: the reply's `request` body written
 * by parts (see the module doc). For any other value, `JSON.stringify`'s.
 */
export const stringify = (reply: unknown): string =>
  isPlain(reply) && isPlain(reply["request"]) ? object(reply, writeReply) : JSON.stringify(reply)
