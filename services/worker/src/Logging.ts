/**
 * One pino logger behind Effect's `Logger`: every `Effect.log*` call becomes
 * a JSON line with the fiber's annotations (tenant, session, turn, ...) as
 * fields. Secrets are held `Redacted` and never logged on purpose; as a last
 * line of defence every line is also scrubbed of the secret values the
 * process was started with ({@link secretsOf}), whatever echoed them (a
 * provider's error body, a driver's message). A logged cause is rendered
 * with every provider API error in it reduced to its status, error type and
 * code, request id and body size ({@link redactCause}): a provider may echo
 * the prompt in its error body, and the SDKs put that body in the error's
 * message.
 */
import { ProviderErrors } from "@ctxd/observe"
import { Cause, HashMap, Layer, Logger, LogLevel } from "effect"
import pino from "pino"

const levels: Record<string, LogLevel.LogLevel> = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  silent: LogLevel.None,
}

/** Parses a pino level name (`LOG_LEVEL`); unknown names mean `info`. */
export const parseLevel = (name: string): LogLevel.LogLevel => levels[name.toLowerCase()] ?? LogLevel.Info

const render = (message: unknown): string =>
  Array.isArray(message) ? message.map(render).join(" ") : typeof message === "string" ? message : JSON.stringify(message)

/** `cause` with each failure and defect passed through `ProviderErrors.redact`. */
export const redactCause = <E>(cause: Cause.Cause<E>): Cause.Cause<unknown> =>
  Cause.match<Cause.Cause<unknown>, E>(cause, {
    onEmpty: Cause.empty,
    onFail: (error) => Cause.fail(ProviderErrors.redact(error)),
    onDie: (defect) => Cause.die(ProviderErrors.redact(defect)),
    onInterrupt: (id) => Cause.interrupt(id),
    onSequential: (left, right) => Cause.sequential(left, right),
    onParallel: (left, right) => Cause.parallel(left, right),
  })

/** An Effect logger writing through `logger`; causes are rendered by {@link redactCause}. */
export const fromPino = (logger: pino.Logger): Logger.Logger<unknown, void> =>
  Logger.make(({ logLevel, message, annotations, cause, spans: _spans }) => {
    const fields: Record<string, unknown> = {}
    for (const [key, value] of HashMap.entries(annotations)) fields[key] = value
    if (!Cause.isEmpty(cause)) fields.err = Cause.pretty(redactCause(cause), { renderErrorCause: true })
    const text = render(message)
    switch (logLevel._tag) {
      case "Fatal":
        return logger.fatal(fields, text)
      case "Error":
        return logger.error(fields, text)
      case "Warning":
        return logger.warn(fields, text)
      case "Debug":
        return logger.debug(fields, text)
      case "Trace":
        return logger.trace(fields, text)
      default:
        return logger.info(fields, text)
    }
  })

/** Variables whose whole value is a secret. */
export const SECRET_VARIABLES = [
  "ANTHROPIC_API_KEY",
  "OPENAI_API_KEY",
  "GEMINI_API_KEY",
  "GOOGLE_API_KEY",
  "CTXD_SUMMARIZER_API_KEY",
  "NATS_PASSWORD",
  "NATS_TOKEN",
  "NATS_NKEY_SEED",
  "PGPASSWORD",
] as const

/** Variables holding URLs whose user info (`user:password@`) is a secret. */
export const SECRET_URL_VARIABLES = ["DATABASE_URL", "NATS_URL"] as const

const userInfoSecrets = (urls: string, loneIsSecret: boolean): ReadonlyArray<string> =>
  urls.split(",").flatMap((url) => {
    const info = /^[a-z][a-z0-9+.-]*:\/\/([^@/]*)@/i.exec(url.trim())?.[1]
    if (info === undefined || info === "") return []
    const colon = info.indexOf(":")
    // `user:password` hides the password; a lone `token@` hides the token (NATS; for Postgres it is a user name)
    if (colon < 0 && !loneIsSecret) return []
    const secret = colon < 0 ? info : info.slice(colon + 1)
    return secret === "" ? [] : [secret, safeDecode(secret)]
  })

const safeDecode = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/**
 * The secret values in `env` ({@link SECRET_VARIABLES}, the passwords in
 * {@link SECRET_URL_VARIABLES}); values under 4 characters are left out (they
 * would garble every line and hide nothing).
 */
export const secretsOf = (env: Readonly<Record<string, string | undefined>>): ReadonlyArray<string> => {
  const values = [
    ...SECRET_VARIABLES.map((name) => env[name]?.trim() ?? ""),
    ...SECRET_URL_VARIABLES.flatMap((name) => userInfoSecrets(env[name] ?? "", name === "NATS_URL")),
  ]
  return [...new Set(values.filter((value) => value.length >= 4))].sort((a, b) => b.length - a.length)
}

/** `line` with every secret (raw or JSON-escaped) replaced by `[redacted]`. */
export const scrub = (line: string, secrets: ReadonlyArray<string>): string => {
  let out = line
  for (const secret of secrets) {
    out = out.replaceAll(secret, "[redacted]")
    const escaped = JSON.stringify(secret).slice(1, -1)
    if (escaped !== secret) out = out.replaceAll(escaped, "[redacted]")
  }
  return out
}

/**
 * Replaces the default logger with pino at `level` (pino level names);
 * every line is scrubbed of `secrets` (default: {@link secretsOf} the
 * process environment).
 */
export const layer = (options: {
  readonly level: string
  readonly name: string
  readonly secrets?: ReadonlyArray<string> | undefined
  /** Where lines go; default stdout. */
  readonly destination?: pino.DestinationStream | undefined
}): Layer.Layer<never> => {
  const secrets = options.secrets ?? secretsOf(process.env)
  const settings: pino.LoggerOptions = {
    name: options.name,
    level: options.level.toLowerCase() === "silent" ? "silent" : options.level,
    ...(secrets.length === 0 ? {} : { hooks: { streamWrite: (line: string) => scrub(line, secrets) } }),
  }
  const logger = options.destination === undefined ? pino(settings) : pino(settings, options.destination)
  return Layer.merge(Logger.replace(Logger.defaultLogger, fromPino(logger)), Logger.minimumLogLevel(parseLevel(options.level)))
}
