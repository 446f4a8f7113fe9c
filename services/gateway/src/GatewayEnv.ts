/**
 * What `ctxd gateway` reads from the environment (or `ctxd.yaml`'s
 * environment-style keys) at start: where it listens, how it reaches the
 * fleet, the providers' base URLs when the `gateway` section names none,
 * and where shadow records go. Everything per request (modes, failure,
 * keys) is the `gateway` section's, reloaded live.
 */
import { ConfigReference } from "@ctxd/config"
import { Config, Option } from "effect"

const optional = (name: string, description: string, shown: string) =>
  Config.option(Config.string(name).pipe(Config.withDescription(description), ConfigReference.shownAs(shown))).pipe(
    Config.map((o) => Option.getOrUndefined(Option.filter(o, (s) => s.trim() !== ""))),
  )

export const config = Config.all({
  host: Config.string("CTXD_GATEWAY_HOST").pipe(
    Config.withDefault("127.0.0.1"),
    Config.withDescription(
      "Address the gateway binds to (0.0.0.0 to serve other machines: then require gateway keys, see docs/gateway.md)",
    ),
  ),
  port: Config.integer("CTXD_GATEWAY_PORT").pipe(
    Config.withDefault(8787),
    Config.withDescription("Port of the gateway: the providers' APIs, /healthz, /readyz, /metrics; 0 picks a free one (printed)"),
    ConfigReference.within({ min: 0, max: 65535 }, "a port number 0..65535 (0: any free port)"),
  ),
  fleet: Config.literal(
    "auto",
    "nats",
    "in-process",
  )("CTXD_GATEWAY_FLEET").pipe(
    Config.withDefault("auto" as const),
    Config.withDescription(
      "Who runs the turns: nats (the worker fleet behind NATS_URL; the gateway is stateless), in-process (the engine in the gateway, sessions in memory), auto (nats when a worker answers there, else in-process)",
    ),
  ),
  anthropic: optional(
    "CTXD_GATEWAY_UPSTREAM_ANTHROPIC",
    "Anthropic's base URL upstream of the gateway when gateway.upstreams names none (never ANTHROPIC_BASE_URL, which may point at the gateway itself)",
    "URL",
  ),
  openai: optional("CTXD_GATEWAY_UPSTREAM_OPENAI", "OpenAI's base URL upstream of the gateway when gateway.upstreams names none", "URL"),
  google: optional(
    "CTXD_GATEWAY_UPSTREAM_GOOGLE",
    "The Gemini API's base URL upstream of the gateway when gateway.upstreams names none",
    "URL",
  ),
  shadowFile: optional(
    "CTXD_GATEWAY_SHADOW_FILE",
    "A JSON Lines file the gateway appends each shadowed request's record to (what each body would cost; no prompt text), read by ctxd inspect --shadow",
    "file path",
  ),
})
export type GatewayEnv = Config.Config.Success<typeof config>

/** The public endpoints, where neither the section nor the environment names one. */
export const PUBLIC = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com",
  google: "https://generativelanguage.googleapis.com",
} as const
