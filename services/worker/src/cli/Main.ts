/**
 * The `ctxd` command line (`npx ctxd ...`; the bin of `@ctxd/worker`).
 * Exit codes: 0 done, 1 failed (a replay with orphaned tool pairs or a
 * rejected turn, an unreadable database, an invalid config file), 2 usage.
 */
import type { Turn } from "@ctxd/contracts"
import type * as ReplayTypes from "./Replay.ts"
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import * as Files from "./Files.ts"
import * as Progress from "./Progress.ts"
import * as Usage from "./Usage.ts"

// The commands' modules load on use: usage errors and help answer at once.

/** The usage of `ctxd` itself (`ctxd help`). */
export const USAGE = Usage.ctxd

/** A usage error: printed with the usage of its command (`usage`, default that of `ctxd`) on stderr, exit 2. */
export class UsageError extends Error {
  readonly usage: string
  constructor(message: string, usage: string = Usage.ctxd) {
    super(message)
    this.usage = usage
  }
}

/** Runs `command` with `args` unless they ask for help; a parse error is a usage error with `usage`. */
const subcommand = async (usage: string, args: ReadonlyArray<string>, command: () => Promise<number>): Promise<number> => {
  if (Usage.asked(args)) {
    process.stdout.write(`${usage}\n`)
    return 0
  }
  try {
    return await command()
  } catch (e) {
    if (e instanceof UsageError) throw e.usage === Usage.ctxd ? new UsageError(e.message, usage) : e
    if ((e as { code?: string }).code?.startsWith("ERR_PARSE_ARGS") === true) throw new UsageError((e as Error).message, usage)
    throw e
  }
}

const int = (name: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a number, got ${JSON.stringify(value)}`)
  return n
}

const formats: ReadonlyArray<Turn.Format> = ["anthropic", "openai", "openai-responses", "gemini"]

/** `ctxd config check <file>`: the worker's own offline check (`ConfigCheck`, also `npm run config:check`). */
export const checkConfigFile = async (file: string): Promise<{ readonly ok: boolean; readonly lines: ReadonlyArray<string> }> => {
  const [{ Effect }, ConfigCheck] = await Promise.all([import("effect"), import("../ConfigCheck.ts")])
  return Effect.runPromise(ConfigCheck.check(file))
}

/**
 * The turn-option sections (`defaults`, `tenants`, `agents`) of a `--config`
 * file, for the replay's turns; an invalid file is a usage error naming the
 * key path and line.
 */
const loadConfigFile = async (file: string) => {
  const [{ Effect, Either }, { RuntimeConfig }] = await Promise.all([import("effect"), import("@ctxd/config")])
  const loaded = await Effect.runPromise(Effect.either(RuntimeConfig.load({ configFile: file, tenantsFile: undefined })))
  if (Either.isLeft(loaded)) throw new UsageError(loaded.left.message)
  const { snapshot } = loaded.right
  return { sections: () => snapshot }
}

const replay = async (args: ReadonlyArray<string>): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: [...args],
    allowPositionals: true,
    options: {
      model: { type: "string" },
      format: { type: "string" },
      "context-window": { type: "string" },
      window: { type: "string" },
      "window-step": { type: "string" },
      budget: { type: "string" },
      "tool-compression": { type: "string" },
      "mask-keep": { type: "string" },
      "cache-ttl": { type: "string" },
      gap: { type: "string" },
      sliding: { type: "string" },
      sessions: { type: "string" },
      config: { type: "string" },
      json: { type: "boolean" },
      html: { type: "string" },
    },
  })
  if (positionals.length === 0)
    throw new UsageError("replay: name at least one log file or directory (e.g. ctxd replay ../shared/data/swe-agent)")
  const format = values.format
  if (format !== undefined && !formats.includes(format as Turn.Format))
    throw new UsageError(`--format must be one of ${formats.join(", ")}`)
  let files: Array<string>
  try {
    files = Files.files(positionals)
  } catch (e) {
    if (e instanceof Files.Missing) throw new UsageError(e.message)
    throw e
  }
  const limit = int("sessions", values.sessions) ?? Infinity
  const logs = []
  for (const file of files) {
    const read = Files.read(file)
    if (read._tag === "Unrecognised") process.stderr.write(`skipped ${file}: ${read.reason}\n`)
    else logs.push(...read.sessions)
  }
  const sessions = logs.slice(0, limit)
  if (sessions.length === 0) {
    process.stderr.write(
      `no sessions found in ${positionals.join(", ")}: give SWE-agent .traj, tau-bench, OpenAI Chat, Anthropic Messages or Responses logs (ctxd help)\n`,
    )
    return 1
  }
  const [{ Schema }, { Turn }, Replay, ReplayHtml, ReplayOutput] = await Promise.all([
    import("effect"),
    import("@ctxd/contracts"),
    import("./Replay.ts"),
    import("./ReplayHtml.ts"),
    import("./ReplayOutput.ts"),
  ])
  const options = Schema.decodeUnknownEither(Turn.Options)(
    Object.fromEntries(
      Object.entries({
        windowMessages: int("window", values.window),
        windowStep: int("window-step", values["window-step"]),
        budgetTokens: int("budget", values.budget),
        toolCompression: values["tool-compression"],
        maskKeep: int("mask-keep", values["mask-keep"]),
        cacheTtlSeconds: int("cache-ttl", values["cache-ttl"]),
      }).filter(([, v]) => v !== undefined),
    ),
    { errors: "all" },
  )
  if (options._tag === "Left") throw new UsageError(`bad turn option: ${String(options.left.message).split("\n").slice(0, 6).join(" ")}`)
  const config = values.config === undefined ? undefined : await loadConfigFile(values.config)
  const setup = Replay.setup({
    model: values.model ?? Replay.defaults.model,
    format: format as Turn.Format | undefined,
    contextWindow: int("context-window", values["context-window"]),
    options: options.right,
    gapSeconds: int("gap", values.gap) ?? Replay.defaults.gapSeconds,
    slidingMessages: int("sliding", values.sliding) ?? Replay.defaults.slidingMessages,
    config,
  })

  const replayer = Replay.make(setup)
  const progress = Progress.make(sessions.reduce((n, s) => n + s.turns.length, 0))
  const results: Array<ReplayTypes.SessionResult> = []
  try {
    for (const s of sessions) results.push(await replayer.session(s, progress.tick))
  } finally {
    progress.done()
    await replayer.dispose()
  }
  const total = Replay.sum(results)
  process.stdout.write(`${values.json === true ? ReplayOutput.json(setup, results, total) : ReplayOutput.table(setup, results, total)}\n`)
  if (values.html !== undefined) {
    writeFileSync(values.html, ReplayHtml.render(setup, results, total))
    process.stderr.write(`wrote ${values.html}\n`)
  }
  return total.orphans > 0 || results.some((r) => r.rejected !== undefined) ? 1 : 0
}

const config = async (args: ReadonlyArray<string>): Promise<number> => {
  if (args[0] !== "check" || args.length !== 2) throw new UsageError("name one file: ctxd config check <file>")
  const checked = await checkConfigFile(args[1]!)
  for (const line of checked.lines) (checked.ok ? process.stdout : process.stderr).write(`${line}\n`)
  return checked.ok ? 0 : 1
}

const inspect = async (args: ReadonlyArray<string>): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: [...args],
    allowPositionals: true,
    options: { turn: { type: "string" }, json: { type: "boolean" } },
  })
  if (positionals.length !== 2) throw new UsageError("name a tenant and a session: ctxd inspect <tenant> <session>")
  const Inspect = await import("./Inspect.ts")
  return Inspect.run({ tenant: positionals[0]!, session: positionals[1]!, turnId: values.turn, json: values.json === true })
}

/** Runs the command line `args` (without `node` and the script); the exit code. */
export const run = async (args: ReadonlyArray<string>): Promise<number> => {
  const [command, ...rest] = args
  try {
    switch (command) {
      case "replay":
        return await subcommand(Usage.replay, rest, () => replay(rest))
      case "serve":
        return await subcommand(Usage.serve, rest, async () => {
          if (rest.length > 0) throw new UsageError(`serve takes no arguments, got ${JSON.stringify(rest.join(" "))}`)
          // the worker runs in this process (no child to forward signals to) and exits it when it stops
          await import("../main.ts")
          return await new Promise<number>(() => {})
        })
      case "inspect":
        return await subcommand(Usage.inspect, rest, () => inspect(rest))
      case "config":
        return await subcommand(Usage.config, rest, () => config(rest))
      case "help":
      case "--help":
      case "-h":
        process.stdout.write(`${USAGE}\n`)
        return 0
      case undefined:
        process.stderr.write(`${USAGE}\n`)
        return 2
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`)
    }
  } catch (e) {
    const usage = e instanceof UsageError || (e as { code?: string }).code?.startsWith("ERR_PARSE_ARGS") === true
    if (!usage) throw e
    const text = e instanceof UsageError ? e.usage : Usage.ctxd
    process.stderr.write(`ctxd: ${(e as Error).message}\n\n${text}\n\nrun \`ctxd help\` for the commands and options\n`)
    return 2
  }
}
