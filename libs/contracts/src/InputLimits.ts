/**
 * Checks of a parsed JSON value that the schemas cannot make, done right
 * after `JSON.parse` and before anything walks the value recursively:
 *
 * - nesting deeper than {@link MAX_DEPTH} levels (objects and arrays, counted
 *   from the root): deeper input would overflow the stack of recursive code
 *   (hashing, schema decoding, rendering);
 * - NUL characters (`\u0000`) in strings or keys: Postgres cannot store them
 *   in `text` or `jsonb`;
 * - lone UTF-16 surrogates (`"\ud800"` as a JSON escape): not Unicode; Postgres
 *   `jsonb` rejects them and `text` would store U+FFFD instead.
 *
 * The walk is iterative (an explicit stack), so any input is safe to check.
 */

/** Deepest nesting of objects and arrays accepted in a request, counted from its root (128). */
export const MAX_DEPTH = 128

/** Why a value is refused: a sentence and the JSON path of the first offending place. */
export interface Problem {
  readonly message: string
  readonly path: string
}

const LONE_SURROGATE = /\p{Cs}/u

const pathOf = (segments: ReadonlyArray<string | number>): string =>
  segments.reduce<string>((acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc === "" ? key : `${acc}.${key}`), "")

/** A value still to check, with the way to it kept as a link to its parent (the path is built only for a problem). */
interface Frame {
  readonly value: unknown
  readonly depth: number
  readonly parent: Frame | undefined
  /** Its key or index in the parent (undefined for the root). */
  readonly key: string | number | undefined
}

const segmentsOf = (frame: Frame | undefined, last?: string): ReadonlyArray<string | number> => {
  const segments: Array<string | number> = last === undefined ? [] : [last]
  for (let f = frame; f !== undefined && f.key !== undefined; f = f.parent) segments.push(f.key)
  return segments.reverse()
}

/** What is wrong with a string, if anything: at `frame`'s value, or at its key `key` (the path built only for a problem). */
const textProblem = (text: string, frame: Frame, key: string | undefined, what: string): Problem | undefined => {
  const nul = text.includes("\u0000")
  if (!nul && !LONE_SURROGATE.test(text)) return undefined
  const path = pathOf(segmentsOf(frame, key))
  const where = `${path || "(root)"}${key !== undefined ? " (a key)" : ""}`
  return nul
    ? { message: `${where}: NUL characters (\\u0000) are not supported in ${what}`, path }
    : { message: `${where}: a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape) is not valid Unicode`, path }
}

/**
 * The first problem of `value` (a freshly parsed JSON value), or `undefined`.
 * `what` names the input in messages (e.g. `turn requests`).
 */
export const check = (value: unknown, what: string, maxDepth: number = MAX_DEPTH): Problem | undefined => {
  const stack: Array<Frame> = [{ value, depth: 0, parent: undefined, key: undefined }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    const { value: v, depth } = frame
    if (typeof v === "string") {
      const problem = textProblem(v, frame, undefined, what)
      if (problem !== undefined) return problem
      continue
    }
    if (typeof v !== "object" || v === null) continue
    if (depth >= maxDepth) {
      const path = pathOf(segmentsOf(frame))
      return { message: `${path || "(root)"}: nesting deeper than ${maxDepth} levels of objects and arrays is not supported`, path }
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth: depth + 1, parent: frame, key: i })
      continue
    }
    const keys = Object.keys(v)
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!
      const problem = textProblem(key, frame, key, what)
      if (problem !== undefined) return problem
      stack.push({ value: (v as Record<string, unknown>)[key], depth: depth + 1, parent: frame, key })
    }
  }
  return undefined
}
