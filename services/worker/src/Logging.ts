/**
 * One pino logger behind Effect's `Logger`: every `Effect.log*` call becomes
 * a JSON line with the fiber's annotations (tenant, session, turn, ...) as
 * fields.
 */
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

/** An Effect logger writing through `logger`. */
export const fromPino = (logger: pino.Logger): Logger.Logger<unknown, void> =>
  Logger.make(({ logLevel, message, annotations, cause, spans: _spans }) => {
    const fields: Record<string, unknown> = {}
    for (const [key, value] of HashMap.entries(annotations)) fields[key] = value
    if (!Cause.isEmpty(cause)) fields.err = Cause.pretty(cause, { renderErrorCause: true })
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

/** Replaces the default logger with pino at `level` (pino level names). */
export const layer = (options: { readonly level: string; readonly name: string }): Layer.Layer<never> => {
  const logger = pino({ name: options.name, level: options.level.toLowerCase() === "silent" ? "silent" : options.level })
  return Layer.merge(
    Logger.replace(Logger.defaultLogger, fromPino(logger)),
    Logger.minimumLogLevel(parseLevel(options.level)),
  )
}
