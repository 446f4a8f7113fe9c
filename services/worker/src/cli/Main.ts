/**
 * The `ctxd` command line (`npx ctxd ...`; the bin of `@ctxd/worker`).
 * Exit codes: 0 done, 1 failed (a replay with orphaned tool pairs or a
 * rejected turn, an unreadable database, an invalid config file), 2 usage.
 */
import type { Turn } from "@ctxd/contracts"
import type * as ReplayTypes from "./Replay.ts"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import * as Files from "./Files.ts"
import * as Progress from "./Progress.ts"
import * as ReplayDefaults from "./ReplayDefaults.ts"
import * as Samples from "./Samples.ts"
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

/** One replay: log files for a model (a group of the bundled samples has a name and a slug). */
interface Run {
  readonly paths: ReadonlyArray<string>
  readonly model: string
  readonly name?: string
  readonly slug?: string
}

/** The bundled samples' groups, each for its model unless `model` names one for all. */
const sampleRuns = (model: string | undefined): Array<Run> => {
  const dir = Samples.samplesDir()
  if (dir === undefined)
    throw new UsageError(`replay: the bundled samples (examples/data) are not here (${import.meta.dirname}): name log files or directories`)
  return Samples.groups.map((g) => ({ name: g.name, slug: g.slug, paths: g.paths.map((p) => join(dir, p)), model: model ?? g.model }))
}

/** The log files under `paths` (a missing one is a usage error). */
const filesOf = (paths: ReadonlyArray<string>): Array<string> => {
  try {
    return Files.files(paths)
  } catch (e) {
    if (e instanceof Files.Missing) throw new UsageError(e.message)
    throw e
  }
}

/** The sessions in `files`; a file that is no log is skipped, saying why on stderr. */
const sessionsIn = (files: ReadonlyArray<string>) => {
  const logs = []
  for (const file of files) {
    const read = Files.read(file)
    if (read._tag === "Unrecognised") process.stderr.write(`skipped ${file}: ${read.reason}\n`)
    else logs.push(...read.sessions)
  }
  return logs
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
  const format = values.format
  if (format !== undefined && !formats.includes(format as Turn.Format))
    throw new UsageError(`--format must be one of ${formats.join(", ")}`)
  const runs = (
    positionals.length > 0 ? [{ paths: positionals, model: values.model ?? ReplayDefaults.defaults.model }] : sampleRuns(values.model)
  ).map((run) => ({ ...run, files: filesOf(run.paths) }))
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
  let left = int("sessions", values.sessions) ?? Infinity
  const done: Array<{ run: Run; setup: ReplayTypes.Setup; results: Array<ReplayTypes.SessionResult>; total: ReplayTypes.Totals }> = []
  for (const run of runs) {
    const sessions = sessionsIn(run.files).slice(0, left)
    left -= sessions.length
    if (sessions.length === 0) continue
    const setup = Replay.setup({
      model: run.model,
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
    done.push({ run, setup, results, total: Replay.sum(results) })
  }
  if (done.length === 0) {
    process.stderr.write(
      `no sessions found in ${runs.flatMap((r) => r.paths).join(", ")}: give SWE-agent .traj, tau-bench, OpenAI Chat, Anthropic Messages or Responses logs (ctxd help)\n`,
    )
    return 1
  }
  const samples = positionals.length === 0
  const report = (d: (typeof done)[number]) =>
    values.json === true ? ReplayOutput.json(d.setup, d.results, d.total) : ReplayOutput.table(d.setup, d.results, d.total)
  if (!samples) process.stdout.write(`${report(done[0]!)}\n`)
  else if (values.json === true)
    process.stdout.write(
      `${JSON.stringify(
        done.map((d) => ({ samples: d.run.name, ...(JSON.parse(report(d)) as object) })),
        null,
        1,
      )}\n`,
    )
  else {
    const outcomes = done.map((d) => ({
      name: d.run.name ?? "",
      model: d.setup.model.name,
      sessions: d.results.length,
      ctxd: d.total.usd.ctxd,
      full: d.total.usd.full,
    }))
    process.stdout.write(`${[Samples.headline(outcomes).join("\n"), ...done.map(report)].join("\n\n")}\n`)
  }
  if (values.html !== undefined) {
    for (const d of done) {
      const file = samples ? values.html.replace(/(\.html?)?$/i, (ext) => `-${d.run.slug}${ext === "" ? ".html" : ext}`) : values.html
      writeFileSync(file, ReplayHtml.render(d.setup, d.results, d.total))
      process.stderr.write(`wrote ${file}\n`)
    }
  }
  return done.some((d) => d.total.orphans > 0 || d.results.some((r) => r.rejected !== undefined)) ? 1 : 0
}

const config = async (args: ReadonlyArray<string>): Promise<number> => {
  if (args[0] !== "check" || args.length !== 2) throw new UsageError("name one file: ctxd config check <file>")
  const checked = await checkConfigFile(args[1]!)
  for (const line of checked.lines) (checked.ok ? process.stdout : process.stderr).write(`${line}\n`)
  return checked.ok ? 0 : 1
}

const gateway = async (args: ReadonlyArray<string>): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: [...args],
    allowPositionals: true,
    options: {
      port: { type: "string" },
      host: { type: "string" },
      mode: { type: "string" },
      fleet: { type: "string" },
      "shadow-file": { type: "string" },
    },
  })
  if (positionals.length > 0) throw new UsageError(`gateway takes no arguments, got ${JSON.stringify(positionals.join(" "))}`)
  const port = int("port", values.port)
  if (port !== undefined && (!Number.isInteger(port) || port > 65_535)) throw new UsageError("--port must be a port number 0..65535")
  const one = <T extends string>(name: string, value: string | undefined, allowed: ReadonlyArray<T>): T | undefined => {
    if (value !== undefined && !allowed.includes(value as T)) throw new UsageError(`--${name} must be one of ${allowed.join(", ")}`)
    return value as T | undefined
  }
  const input = {
    port,
    host: values.host,
    mode: one("mode", values.mode, ["active", "shadow", "off"] as const),
    fleet: one("fleet", values.fleet, ["auto", "nats", "in-process"] as const),
    shadowFile: values["shadow-file"],
  }
  const Gateway = await import("./Gateway.ts")
  try {
    return await Gateway.run(input)
  } catch (e) {
    // a bad config file, a port taken, an unusable upstream URL: said in one line, exit 1
    process.stderr.write(`ctxd gateway: ${(e as Error).message}\n`)
    return 1
  }
}

const inspect = async (args: ReadonlyArray<string>): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: [...args],
    allowPositionals: true,
    options: { turn: { type: "string" }, json: { type: "boolean" }, shadow: { type: "string" } },
  })
  if (values.shadow !== undefined) {
    if (positionals.length > 2 || values.turn !== undefined)
      throw new UsageError("with --shadow name at most a tenant and a session: ctxd inspect --shadow FILE [<tenant> [<session>]]")
    const ShadowInspect = await import("./ShadowInspect.ts")
    return ShadowInspect.run({ file: values.shadow, tenant: positionals[0], session: positionals[1], json: values.json === true })
  }
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
      case "gateway":
        return await subcommand(Usage.gateway, rest, () => gateway(rest))
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
