/**
 * `ctxd gateway`: the providers' APIs in front of ctxd. It reads its start
 * settings (`GatewayEnv`, the environment over `ctxd.yaml`'s environment
 * keys), watches the configuration files (`RuntimeConfig`: the `gateway`
 * and `tenants` sections apply to the next request), picks who runs the
 * turns (a worker answering on NATS, else this process), prints the base
 * URLs to set, and serves until SIGTERM or SIGINT.
 *
 * The variables printed are the ones the clients read: `ANTHROPIC_BASE_URL`
 * (Anthropic SDK, Claude Code), `OPENAI_BASE_URL` (OpenAI SDK; Codex CLI
 * takes a provider `base_url` in its config.toml instead),
 * `GOOGLE_GEMINI_BASE_URL` (Gemini CLI; `@google/genai` takes
 * `httpOptions.baseUrl`).
 */
import { type ContextClient } from "@ctxd/client"
import { RuntimeConfig } from "@ctxd/config"
import { ProviderKeys } from "@ctxd/context"
import { GatewayConfig, GatewayEnv, InProcessPort, NatsPort, type Port, Session, Shadow, startServer } from "@ctxd/gateway"
import { Config, ConfigProvider, Effect, Exit, Scope } from "effect"
import { appendFileSync } from "node:fs"
import { connect } from "node:net"
import pino from "pino"
import * as WorkerConfig from "../WorkerConfig.ts"

export interface Input {
  readonly port?: number | undefined
  readonly host?: string | undefined
  readonly mode?: "active" | "shadow" | "off" | undefined
  readonly fleet?: "auto" | "nats" | "in-process" | undefined
  readonly shadowFile?: string | undefined
  /** Where the lines to read go (default stdout). */
  readonly out?: ((line: string) => void) | undefined
  /** Resolves when the gateway should stop (default: SIGTERM or SIGINT). */
  readonly until?: Promise<unknown> | undefined
}

/** What the process reads at start: the gateway's knobs, NATS, the files, who may use the gateway's keys. */
const settings = Config.all({
  gateway: GatewayEnv.config,
  natsUrl: Config.string("NATS_URL").pipe(Config.withDefault("nats://127.0.0.1:4222")),
  root: Config.string("CTXD_SUBJECT_ROOT").pipe(Config.withDefault("ctx")),
  configFile: Config.string("CTXD_CONFIG_FILE").pipe(Config.withDefault("")),
  tenantsFile: Config.string("CTXD_TENANTS_FILE").pipe(Config.withDefault("")),
  workerKeyTenants: Config.string("CTXD_WORKER_KEY_TENANTS").pipe(Config.withDefault("*"), Config.map(ProviderKeys.parseWorkerKeyTenants)),
  logLevel: Config.string("LOG_LEVEL").pipe(Config.withDefault("info")),
})

/** Whether something accepts TCP connections at the first server of `url` within `ms`. */
const reachable = (url: string, ms = 1_000): Promise<boolean> =>
  new Promise((resolve) => {
    const first = url.split(",")[0]!.trim()
    const parsed = URL.canParse(first) ? new URL(first) : new URL(`nats://${first}`)
    const socket = connect({ host: parsed.hostname, port: Number(parsed.port || 4222) })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(ms, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

/** The fleet over NATS when a worker answers there (or `fleet` says nats), else the engine in this process. */
const choosePort = async (
  fleet: "auto" | "nats" | "in-process",
  s: { readonly natsUrl: string; readonly root: string },
  options: { readonly shadow: Shadow.Recorder; readonly logger: pino.Logger; readonly sections: () => RuntimeConfig.Sections },
): Promise<{ readonly port: Port.TurnPort; readonly why: string }> => {
  // in-process turns read ctxd.yaml's turn option sections as a worker does (each turn the current snapshot)
  const inProcess = (why: string) => ({
    port: InProcessPort.make({ shadow: options.shadow, logger: options.logger, config: { sections: options.sections } }),
    why,
  })
  if (fleet === "in-process") return inProcess("in-process (CTXD_GATEWAY_FLEET)")
  if (fleet === "auto" && !(await reachable(s.natsUrl))) return inProcess(`in-process: no NATS at ${shown(s.natsUrl)}`)
  const connectOptions: ContextClient.ConnectOptions = { servers: s.natsUrl, root: s.root, auth: "env" }
  const port = await NatsPort.connect(connectOptions, { shadow: options.shadow, logger: options.logger })
  if (fleet === "nats" || (await port.ready())) return { port, why: `the fleet on NATS ${shown(s.natsUrl)} (root ${s.root})` }
  await port.close()
  return inProcess(`in-process: no ctxd worker answers on NATS ${shown(s.natsUrl)} (root ${s.root})`)
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"])

/** Whether `base` names the gateway's own address (a loopback name for a loopback bind counts). */
const pointsAt = (base: string, server: { readonly host: string; readonly port: number }): boolean => {
  if (!URL.canParse(base)) return false
  const url = new URL(base)
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80))
  const same = url.hostname === server.host || (LOOPBACK.has(url.hostname) && LOOPBACK.has(server.host))
  return same && port === server.port
}

/** A NATS URL without its credentials. */
const shown = (url: string): string => url.replace(/\/\/[^@/]*@/g, "//")

/** Runs the gateway until `input.until` (default a signal); the exit code. */
export const run = async (input: Input = {}): Promise<number> => {
  const out = input.out ?? ((line: string) => process.stdout.write(`${line}\n`))
  const knobs = await Effect.runPromise(WorkerConfig.fileKnobs)
  const provider = ConfigProvider.fromEnv().pipe(ConfigProvider.orElse(() => ConfigProvider.fromMap(new Map(Object.entries(knobs)))))
  const s = await Effect.runPromise(Effect.withConfigProvider(settings, provider))
  const logger = pino({ name: "ctxd-gateway", level: s.logLevel }, pino.destination(2))
  const scope = Effect.runSync(Scope.make())
  try {
    const runtime = await Effect.runPromise(
      Scope.extend(RuntimeConfig.make({ configFile: s.configFile, tenantsFile: s.tenantsFile }), scope),
    )
    const config = GatewayConfig.make({ current: runtime.current, workerKeyTenants: s.workerKeyTenants, defaultMode: input.mode })
    const shadowFile = input.shadowFile ?? s.gateway.shadowFile
    const shadow = Shadow.make(
      shadowFile === undefined
        ? {}
        : {
            sink: (record) => {
              try {
                appendFileSync(shadowFile, `${JSON.stringify(record)}\n`)
              } catch (e) {
                logger.warn({ file: shadowFile, code: (e as NodeJS.ErrnoException).code }, "shadow record not written")
              }
            },
          },
    )
    const { port, why } = await choosePort(input.fleet ?? s.gateway.fleet, s, { shadow, logger, sections: runtime.current })
    const upstreams = config.upstreams()
    const chosen = {
      anthropic: upstreams.anthropic ?? s.gateway.anthropic ?? GatewayEnv.PUBLIC.anthropic,
      openai: upstreams.openai ?? s.gateway.openai ?? GatewayEnv.PUBLIC.openai,
      google: upstreams.google ?? s.gateway.google ?? GatewayEnv.PUBLIC.google,
    }
    const server = await startServer({
      turns: port,
      host: input.host ?? s.gateway.host,
      port: input.port ?? s.gateway.port,
      upstreams: chosen,
      mode: config.mode,
      failure: config.failure,
      promptTimeoutMs: config.promptTimeoutMs,
      authenticate: (request) => config.authenticate(request),
      // sessions without client changes: ctxd's headers, the CLIs' own session ids, else derived; side calls apart
      sessionOf: Session.SessionOf.forServer(),
      logger,
    }).catch(async (e: unknown) => {
      await port.close()
      throw e
    })
    const loop = Object.entries(chosen).find(([, base]) => pointsAt(base, server))
    if (loop !== undefined) {
      await server.close()
      await port.close()
      throw new Error(`the ${loop[0]} upstream ${loop[1]} is this gateway itself (every request would come back to it)`)
    }
    out(`ctxd gateway on ${server.url}: turns run by ${why}`)
    out("point your agents at it:")
    out(`  export ANTHROPIC_BASE_URL=${server.url}`)
    out(`  export OPENAI_BASE_URL=${server.url}/v1`)
    out(`  export GOOGLE_GEMINI_BASE_URL=${server.url}`)
    out(`default mode: ${config.mode("*", "default")} (ctxd.yaml gateway section, reloaded live); Ctrl-C stops`)
    await (input.until ?? signalled())
    await server.close()
    await port.close()
    return 0
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** Resolves on the first SIGTERM or SIGINT. */
const signalled = (): Promise<NodeJS.Signals> =>
  new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off("SIGTERM", on)
      process.off("SIGINT", on)
      resolve(signal)
    }
    process.once("SIGTERM", on)
    process.once("SIGINT", on)
  })
