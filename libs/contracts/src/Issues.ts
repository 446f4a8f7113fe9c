/**
 * Schema parse errors as short, bounded sentences for error replies. Effect's
 * formatters echo the offending value whole (`Expected ..., actual <value>`):
 * a 600 KB string becomes a 600 KB message and a reply over the bus's limit.
 * Here every echoed value is a preview of at most {@link MAX_ECHO} characters
 * (strings with their length), each issue's message is capped, and only the
 * first few issues are listed.
 */
import { ParseResult } from "effect"
import * as Errors from "./Errors.ts"

/** Most characters of an input value an error message echoes (default 200). */
export const MAX_ECHO = 200

/** Most characters of one issue's message. */
const MAX_ISSUE = 600

/** Issues listed in a message; the rest are counted. */
const SHOWN = 5

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A bounded rendering of `value` for an error message: JSON-like, strings
 * cut to `max` characters (with their full length), objects and arrays cut
 * after `max` characters of output or 3 levels deep. Never recurses deeper
 * than that, so it is safe on any input.
 */
export const preview = (value: unknown, max = MAX_ECHO): string => {
  if (typeof value === "string") {
    if (value.length <= max) return JSON.stringify(value)
    const code = value.charCodeAt(max - 1)
    const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max
    return `${JSON.stringify(`${value.slice(0, end)}…`)} (${value.length} chars)`
  }
  let out = ""
  const go = (v: unknown, depth: number): void => {
    if (out.length > max) return
    if (Array.isArray(v)) {
      if (depth >= 3) return void (out += `[…${v.length}]`)
      out += "["
      for (let i = 0; i < v.length; i++) {
        if (out.length > max) return void (out += "…]")
        if (i > 0) out += ","
        go(v[i], depth + 1)
      }
      out += "]"
      return
    }
    if (isRecord(v)) {
      if (depth >= 3) return void (out += "{…}")
      out += "{"
      let first = true
      for (const key of Object.keys(v)) {
        if (out.length > max) return void (out += "…}")
        out += `${first ? "" : ","}${JSON.stringify(Errors.cap(key, 40))}:`
        first = false
        go(v[key], depth + 1)
      }
      out += "}"
      return
    }
    if (typeof v === "string") return void (out += JSON.stringify(Errors.cap(v, Math.max(20, max - out.length))))
    out += v === undefined ? "undefined" : typeof v === "bigint" ? `${v}n` : (JSON.stringify(v) ?? String(v))
  }
  go(value, 0)
  return Errors.cap(out, max)
}

/** Stands in for an input value inside an issue: Effect's formatter prints its `toString`. */
class Preview {
  readonly text: string
  constructor(text: string) {
    this.text = text
  }
  toString(): string {
    return this.text
  }
}

const shrink = (actual: unknown): unknown =>
  actual === undefined || actual === null || typeof actual === "number" || typeof actual === "boolean"
    ? actual
    : new Preview(preview(actual))

/** `issue` with every `actual` replaced by a bounded preview (the tree is rebuilt, iteratively where it is deep). */
const previewIssue = (issue: ParseResult.ParseIssue): ParseResult.ParseIssue => {
  switch (issue._tag) {
    case "Type":
      return new ParseResult.Type(issue.ast, shrink(issue.actual), issue.message)
    case "Forbidden":
      return new ParseResult.Forbidden(issue.ast, shrink(issue.actual), issue.message)
    case "Unexpected":
      return new ParseResult.Unexpected(shrink(issue.actual), issue.message)
    case "Missing":
      return issue
    case "Pointer":
      return new ParseResult.Pointer(issue.path, shrink(issue.actual), previewIssue(issue.issue))
    case "Refinement":
      return new ParseResult.Refinement(issue.ast, shrink(issue.actual), issue.kind, previewIssue(issue.issue))
    case "Transformation":
      return new ParseResult.Transformation(issue.ast, shrink(issue.actual), issue.kind, previewIssue(issue.issue))
    case "Composite": {
      const issues = Array.isArray(issue.issues)
        ? (issue.issues.map(previewIssue) as unknown as readonly [ParseResult.ParseIssue, ...Array<ParseResult.ParseIssue>])
        : previewIssue(issue.issues as ParseResult.ParseIssue)
      return new ParseResult.Composite(issue.ast, shrink(issue.actual), issues, issue.output)
    }
  }
}

/** Renders a parse path the way a JSON user reads it: `messages[3].content`. */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`), "")

/** What a parse error says, bounded: a message listing the first issues and the path of the first. */
export interface Described {
  readonly message: string
  readonly path?: string
}

/** The first issues of `error` as `path: message; ...` (+N more), echoed values previewed, each capped. */
export const describe = (error: ParseResult.ParseError): Described => {
  const issues = ParseResult.ArrayFormatter.formatIssueSync(previewIssue(error.issue))
  const shown = issues.slice(0, SHOWN).map((issue) => Errors.cap(`${formatPath(issue.path) || "(root)"}: ${issue.message}`, MAX_ISSUE))
  const more = issues.length > shown.length ? ` (+${issues.length - shown.length} more)` : ""
  const first = issues[0]
  return {
    message: `${shown.join("; ")}${more}`,
    ...(first === undefined ? {} : { path: Errors.cap(formatPath(first.path), Errors.MAX_PATH) }),
  }
}
