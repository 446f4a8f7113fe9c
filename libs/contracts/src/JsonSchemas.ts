/**
 * The JSON Schema documents of wire contract v1, generated from the Effect
 * Schemas, for callers in other languages. `npm run schemas` writes them to
 * `docs/schemas/`; a test fails when the committed files differ.
 */
import { JSONSchema, type Schema } from "effect"
import * as Compact from "./Compact.ts"
import * as Errors from "./Errors.ts"
import * as Health from "./Health.ts"
import * as Knowledge from "./Knowledge.ts"
import * as Learn from "./Learn.ts"
import * as Loop from "./Loop.ts"
import * as Memory from "./Memory.ts"
import * as Session from "./Session.ts"
import * as Summarize from "./Summarize.ts"
import * as Tokens from "./Tokens.ts"
import * as Turn from "./Turn.ts"

const documents: ReadonlyArray<readonly [string, Schema.Schema.Any]> = [
  ["turn-request", Turn.TurnRequestWire],
  ["turn-reply", Turn.TurnReply],
  ["error-reply", Errors.ErrorReply],
  ["health-reply", Health.HealthReply],
  ["knowledge-request", Knowledge.Request],
  ["knowledge-reply", Knowledge.Reply],
  ["memory-request", Memory.Request],
  ["memory-reply", Memory.Reply],
  ["loop-check-request", Loop.CheckRequest],
  ["loop-check-reply", Loop.CheckReply],
  ["usage-report", Tokens.UsageReport],
  ["usage-reply", Tokens.UsageReply],
  ["tokens-count-request", Tokens.CountRequest],
  ["tokens-count-reply", Tokens.CountReply],
  ["summarize-request", Summarize.SummarizeRequest],
  ["summarize-reply", Summarize.SummarizeReply],
  ["compact-request", Compact.CompactRequest],
  ["compact-reply", Compact.CompactReply],
  ["learn-request", Learn.LearnRequest],
  ["learn-reply", Learn.LearnReply],
  ["session-request", Session.Request],
  ["session-delete-reply", Session.DeleteReply],
  ["session-export-reply", Session.ExportReply],
  ["user-request", Session.UserRequest],
  ["user-delete-reply", Session.UserDeleteReply],
]

/**
 * The decoders accept unknown fields (they are dropped): an older worker must
 * take a newer caller's request, and a caller a newer worker's reply, during a
 * rolling upgrade. Effect writes `additionalProperties: false` for every
 * struct; the documents say `true`, as the decoders behave.
 */
const openObjects = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(openObjects)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => [key, key === "additionalProperties" && v === false ? true : openObjects(v)]),
  )
}

/** File name → pretty-printed JSON Schema text (with a trailing newline). */
export const render = (): ReadonlyArray<readonly [file: string, text: string]> =>
  documents.map(([name, schema]) => [`${name}.schema.json`, JSON.stringify(openObjects(JSONSchema.make(schema)), null, 2) + "\n"])
