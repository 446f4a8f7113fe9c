/**
 * Turning request bytes into a typed turn request, or a `BadRequest` that
 * says where the input is wrong. Never throws.
 */
import { Normalize, Providers } from "@ctxd/context"
import { type Conversation, Errors, InputLimits, Issues, Turn } from "@ctxd/contracts"
import { Json } from "@ctxd/nats"
import { Effect, Either, type ParseResult, Schema } from "effect"
import { randomUUID } from "node:crypto"
import * as Prefixes from "./Prefixes.ts"

/** Renders a parse path the way a JSON user reads it: `messages[3].content`. */
export const formatPath = Issues.formatPath

/**
 * Parses UTF-8 JSON; bad UTF-8 or a syntax error becomes `BadRequest`. Then,
 * before anything walks the value recursively, {@link InputLimits.check}
 * (iterative): nesting deeper than {@link InputLimits.MAX_DEPTH} levels, NUL
 * characters (Postgres cannot store them in `jsonb`) and lone UTF-16
 * surrogates are refused with a `BadRequest` naming the path.
 */
export const parseJson = (data: Uint8Array): Effect.Effect<unknown, Errors.BadRequest> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) {
    return Effect.fail(
      new Errors.BadRequest({ message: Errors.cap(json.left.message, 300), hint: "send one UTF-8 JSON object per request" }),
    )
  }
  const problem = InputLimits.check(json.right, "turn requests")
  if (problem !== undefined) {
    return Effect.fail(new Errors.BadRequest({ message: problem.message, path: problem.path }))
  }
  return Effect.succeed(json.right)
}

/**
 * Validates a parsed value against the turn request schema. The first few
 * issues are listed in the message (echoed values cut to
 * {@link Issues.MAX_ECHO} characters); `path` names the first one.
 */
export const turnRequest = (value: unknown): Effect.Effect<Turn.TurnRequest, Errors.BadRequest> => {
  const format = formatOf(value)
  if (Either.isLeft(format)) return Effect.fail(format.left)
  return Either.match(decodeAs(format.right, value), { onLeft: Effect.fail, onRight: Effect.succeed })
}

/** The request's `format`, or the `BadRequest` for a value that is no object or names no known format. */
const formatOf = (value: unknown): Either.Either<Turn.Format, Errors.BadRequest> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Either.left(new Errors.BadRequest({ message: "the request must be a JSON object" }))
  }
  const format = (value as { format?: unknown }).format
  if (!Providers.isFormat(format)) {
    return Either.left(
      new Errors.BadRequest({
        message: `unknown format ${Issues.preview(format ?? null)}: expected "anthropic", "openai", "openai-responses" or "gemini"`,
        path: "format",
      }),
    )
  }
  return Either.right(format)
}

// Decode against the member the format names, so the errors speak of that format only.
const options = { errors: "all", onExcessProperty: "ignore" } as const
const decoders = {
  anthropic: Schema.decodeUnknownEither(Turn.AnthropicTurnRequest, options),
  openai: Schema.decodeUnknownEither(Turn.OpenAITurnRequest, options),
  "openai-responses": Schema.decodeUnknownEither(Turn.OpenAIResponsesTurnRequest, options),
  gemini: Schema.decodeUnknownEither(Turn.GeminiTurnRequest, options),
} as const

const decodeAs = (format: Turn.Format, value: unknown): Either.Either<Turn.TurnRequest, Errors.BadRequest> => {
  const result: Either.Either<Turn.TurnRequest, ParseResult.ParseError> = decoders[format](value)
  if (Either.isRight(result)) return Either.right(result.right)
  // echoed values are previews (≤ 200 characters): a 600 KB value must not make a reply over the bus's limit
  const described = Issues.describe(result.left)
  return Either.left(
    new Errors.BadRequest({
      message: `invalid turn request: ${described.message}`,
      ...(described.path === undefined ? {} : { path: described.path }),
    }),
  )
}

/**
 * The idempotency hash of a turn: `current` is stored with a new turn;
 * `legacy` is what workers before issue 18 stored (the SHA-256 of the whole
 * decoded request's JSON), computed only when a stored turn carries one.
 */
export interface TurnHash {
  readonly current: string
  readonly legacy: () => string
}

/** The prefix of {@link TurnHash.current} (hashes without it are legacy ones). */
export const HASH_VERSION = "v2:"

/** A decoded turn request, with its idempotency hash and its cached parts. */
export interface Decoded {
  /** The request, `system`/`tools` refs replaced by what they name. */
  readonly request: Turn.TurnRequest
  readonly hash: TurnHash
  /** The request's `system` and `tools` as cached (`Prefixes`): their hashes are the reply's `refs`. */
  readonly parts: { readonly system?: Prefixes.Entry | undefined; readonly tools?: Prefixes.Entry | undefined }
  /** The content in neutral form, given instead of the request's `messages`, `system` and `tools` (see {@link given}). */
  readonly normalized?: Normalize.NormalizedRequest | undefined
}

const { KINDS } = Prefixes

/** Parts shorter than this are parsed as they come (looking for them costs about what parsing them does). */
const SPLICE_MIN = 256

/**
 * What the parse reads where a part was found: a string no request can
 * hold (a NUL, which the input checks refuse, and a nonce of this process).
 */
const MARKER = `\u0000ctxd-part-${randomUUID()}`
const MARKER_JSON = JSON.stringify(MARKER)

// the request's start: a leading BOM is dropped, as `Json.text` drops it; the text between and after the
// parts cut out is not the request's start, so a U+FEFF there is kept (the parse refuses it, as it would the whole text)
const decoder = new TextDecoder("utf-8", { fatal: true })
const inner = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * Parses a request's bytes. The `system` and `tools` the session sent last
 * that stand in them byte for byte as the cache holds them (the UTF-8 of
 * their JSON as `JSON.stringify` writes it, as clients that resend them in
 * full usually do) are cut out first and neither decoded nor parsed again:
 * the parse reads a marker there. When a marker is not where the part's key
 * is (the bytes were found nested, or under a duplicate key), in a request
 * of another format, or the cut text does not parse, the request's own text
 * is parsed as it is.
 */
const parseSpliced = (
  data: Uint8Array,
  prefixes: Prefixes.Prefixes,
  ids: { readonly tenant: string; readonly session: string },
): { readonly json: Either.Either<unknown, Json.MalformedJson>; readonly found: Partial<Record<Prefixes.Kind, Prefixes.Entry>> } => {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  const cuts: Array<{ readonly at: number; readonly end: number }> = []
  let format: Turn.Format | undefined
  const found: Partial<Record<Prefixes.Kind, Prefixes.Entry>> = {}
  for (const kind of KINDS) {
    const last = prefixes.last(ids.tenant, ids.session, kind)
    const part = last?.entry.utf8
    if (part === undefined || part.length < SPLICE_MIN || (format !== undefined && last!.format !== format)) continue
    // the first place not overlapping a part cut already (the JSON of a part starts and ends with an ASCII
    // character, so a match of its bytes is a match of its text: the cuts fall between characters)
    let at = bytes.indexOf(part)
    while (at >= 0 && cuts.some((c) => at < c.end && c.at < at + part.length)) at = bytes.indexOf(part, at + 1)
    if (at < 0) continue
    cuts.push({ at, end: at + part.length })
    format = last!.format
    found[kind] = last!.entry
  }
  if (format === undefined) return { json: Json.decode(data), found }
  cuts.sort((a, b) => a.at - b.at)
  let cut: string
  try {
    // each stretch between the parts decoded on its own (the parts' bytes are known to be valid UTF-8)
    cut = ""
    let from = 0
    for (const { at, end } of cuts) {
      cut += `${(from === 0 ? decoder : inner).decode(bytes.subarray(from, at))}${MARKER_JSON}`
      from = end
    }
    cut += inner.decode(bytes.subarray(from))
  } catch {
    return { json: Json.decode(data), found: {} }
  }
  const json = Json.parse(cut)
  const value = Either.isRight(json) ? json.right : undefined
  const top = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  const placed = top !== undefined && top["format"] === format && KINDS.every((kind) => found[kind] === undefined || top[kind] === MARKER)
  return placed ? { json, found } : { json: Json.decode(data), found: {} }
}

/**
 * A turn request's bytes, decoded for the session `ids`: `system` and
 * `tools` seen before (by content hash) are taken from `prefixes` without
 * checking or decoding them again, and `{ref}` for a part this session sent
 * before resolves to it (an unknown ref is a `BadRequest` with path
 * `system.ref` / `tools.ref`: resend in full). The rest goes through
 * {@link parseJson}'s input checks and {@link turnRequest}'s schema, as
 * everything did before; new parts are cached once they passed.
 *
 * The idempotency hash covers the rest of the decoded request and the
 * parts' hashes, so the same turn sent in full or by ref hashes alike.
 */
export const turn = (
  data: Uint8Array,
  prefixes: Prefixes.Prefixes,
  ids: { readonly tenant: string; readonly session: string },
): Either.Either<Decoded, Errors.BadRequest> => {
  const malformed = (error: Json.MalformedJson) =>
    Either.left(new Errors.BadRequest({ message: Errors.cap(error.message, 300), hint: "send one UTF-8 JSON object per request" }))
  const { json, found } = parseSpliced(data, prefixes, ids)
  if (Either.isLeft(json)) return malformed(json.left)
  const format = formatOf(json.right)
  if (Either.isLeft(format)) return Either.left(format.left)
  const moved = clientHistory(json.right as Record<string, unknown>, format.right)
  if (Either.isLeft(moved)) return Either.left(moved.left)
  const raw = moved.right
  const parts: { system?: Prefixes.Entry; tools?: Prefixes.Entry } = {}
  const misses: Array<{ readonly kind: Prefixes.Kind; readonly hash: string; readonly text: string }> = []
  let rest = raw
  for (const kind of KINDS) {
    const value = raw[kind]
    if (value === undefined) continue
    const ref = Prefixes.refOf(value)
    if (found[kind] !== undefined) {
      // found in the text as this session sent it last: checked and decoded when it was cached
      parts[kind] = found[kind]
    } else if (ref !== undefined) {
      const entry =
        Prefixes.REF.test(ref) && prefixes.known(ids.tenant, ids.session, kind, ref) ? prefixes.get(format.right, kind, ref) : undefined
      if (entry === undefined) {
        return Either.left(
          new Errors.BadRequest({
            message: `unknown ${kind} ref ${Issues.preview(ref)}: this worker does not hold that ${kind} for the session (it restarted, took the session over, or forgot it)`,
            path: `${kind}.ref`,
            hint: `resend the turn with the full ${kind}`,
          }),
        )
      }
      parts[kind] = entry
    } else if (kind === "system" ? Prefixes.cacheableSystem(value) : Prefixes.cacheableTools(value)) {
      const hashed = Prefixes.hashOf(value)
      if (hashed === undefined) continue
      const entry = prefixes.get(format.right, kind, hashed.hash)
      if (entry === undefined) misses.push({ kind, ...hashed })
      else parts[kind] = entry
    } else {
      continue
    }
    // checked and decoded when it was cached: only the rest is
    if (parts[kind] !== undefined) {
      if (rest === raw) rest = { ...raw }
      delete rest[kind]
    }
  }
  const problem = InputLimits.check(rest, "turn requests")
  if (problem !== undefined) return Either.left(new Errors.BadRequest({ message: problem.message, path: problem.path }))
  const decoded = decodeAs(format.right, rest)
  if (Either.isLeft(decoded)) return Either.left(decoded.left)
  const fields = decoded.right as Record<string, unknown>
  for (const miss of misses) {
    const entry = Prefixes.entryOf(miss.kind, miss, fields[miss.kind])
    prefixes.put(format.right, entry)
    parts[miss.kind] = entry
  }
  const request = (rest === raw ? fields : { ...fields, ...resolved(parts) }) as Turn.TurnRequest
  // the parts count by their hashes: sent in full or by ref, a turn hashes alike
  const others: Record<string, unknown> = { ...fields }
  if (parts.system !== undefined) delete others["system"]
  if (parts.tools !== undefined) delete others["tools"]
  const current = `${HASH_VERSION}${Prefixes.sha256(`${JSON.stringify(others)}\n${parts.system?.hash ?? ""}\n${parts.tools?.hash ?? ""}`)}`
  const legacy = () => {
    const whole = rest === raw ? Either.right(request) : decodeAs(format.right, { ...raw, ...resolved(parts) })
    return Either.isRight(whole) ? Prefixes.sha256(JSON.stringify(whole.right)) : ""
  }
  return Either.right({ request, hash: { current, legacy }, parts })
}

/**
 * A request whose history travels in `clientHistory` (`history: "client"`;
 * see `Turn.HistoryMode`) with it moved to the format's own field, where
 * every later step reads it; `BadRequest` naming `clientHistory` when it
 * comes without `history: "client"` or beside the format's field.
 */
const clientHistory = (raw: Record<string, unknown>, format: Turn.Format): Either.Either<Record<string, unknown>, Errors.BadRequest> => {
  if (!("clientHistory" in raw)) return Either.right(raw)
  const field = Providers.of(format).historyField
  if (raw["history"] !== "client")
    return Either.left(new Errors.BadRequest({ message: 'clientHistory is taken only with history: "client"', path: "clientHistory" }))
  if (field in raw)
    return Either.left(
      new Errors.BadRequest({ message: `send the history in clientHistory or in ${field}, not both`, path: "clientHistory" }),
    )
  const { clientHistory: history, ...rest } = raw
  return Either.right({ ...rest, [field]: history })
}

/** The parts' decoded values, by field. */
const resolved = (parts: Decoded["parts"]): Record<string, unknown> => ({
  ...(parts.system === undefined ? {} : { system: parts.system.decoded }),
  ...(parts.tools === undefined ? {} : { tools: parts.tools.decoded }),
})

/** The hashes of a decoded request's parts: the reply's `refs` (undefined: none). */
export const refs = (decoded: Decoded): Prefixes.Refs | undefined =>
  decoded.parts.system === undefined && decoded.parts.tools === undefined
    ? undefined
    : {
        ...(decoded.parts.system === undefined ? {} : { system: decoded.parts.system.hash }),
        ...(decoded.parts.tools === undefined ? {} : { tools: decoded.parts.tools.hash }),
      }

/**
 * A request decoded already, its content given in neutral form: replays of
 * logs (`InProcessTurns`) hand the shell what they read, with no wire body
 * to parse. The hash covers the request and that content, as a wire turn's
 * covers its body.
 */
export const given = (request: Turn.TurnRequest, normalized: Normalize.NormalizedRequest): Decoded => {
  const current = `${HASH_VERSION}${Prefixes.sha256(`${JSON.stringify(request)}\n${JSON.stringify(normalized)}`)}`
  return { request, hash: { current, legacy: () => current }, parts: {}, normalized }
}

/**
 * The request's content in neutral form (`Normalize.request`), the cached
 * parts normalized once and then reused as the same objects; the given
 * content of a {@link given} request as it is.
 */
export const normalized = (
  decoded: Decoded,
  openCalls: () => ReadonlyArray<Normalize.OpenCall>,
  workspace: ReadonlyArray<Conversation.SystemSection> | undefined,
): Normalize.NormalizedRequest => {
  const { request, parts } = decoded
  if (decoded.normalized !== undefined) return decoded.normalized
  if (parts.system === undefined && parts.tools === undefined) return Normalize.request(request, openCalls, workspace)
  const stripped: Record<string, unknown> = { ...request }
  if (parts.system !== undefined) delete stripped["system"]
  if (parts.tools !== undefined) delete stripped["tools"]
  const base = Normalize.request(stripped as Turn.TurnRequest, openCalls, workspace)
  let system = base.system
  if (parts.system !== undefined) {
    const sections = (parts.system.normalized ??= Normalize.system(
      parts.system.decoded as Turn.System,
    )) as ReadonlyArray<Conversation.SystemSection>
    // after them, the sections of the format's own field (`instructions`, `systemInstruction`)
    system = base.system.length === 0 ? sections : [...sections, ...base.system]
  }
  const tools =
    parts.tools === undefined
      ? base.tools
      : ((parts.tools.normalized ??= Normalize.tools(request.format, parts.tools.decoded as never)) as ReadonlyArray<Conversation.Tool>)
  return { messages: base.messages, system, tools }
}
