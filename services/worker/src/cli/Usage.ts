/**
 * The usage texts of the `ctxd` command and of each subcommand: what
 * `--help` / `-h` prints (stdout, exit 0) and what a usage error shows
 * (stderr, exit 2). Nothing here loads more than the small modules it
 * names (the replay's defaults, the bundled samples' groups).
 */
import { defaults as REPLAY_DEFAULTS } from "./ReplayDefaults.ts"
import { groups as SAMPLES } from "./Samples.ts"

/** `ctxd replay --help`. */
export const replay = `usage: ctxd replay [files or dirs...] [options]

replays recorded agent logs in-process (no servers): SWE-agent .traj, tau-bench results (tools
from a tau-bench-tools.json beside them), OpenAI Chat message arrays or {messages, tools}
(.json; .jsonl: one conversation per line), Anthropic Messages {system, messages, tools} and
OpenAI Responses items or {instructions, input, tools}.
Without files it replays the real sessions bundled with ctxd (examples/data), each group
for its model: ${SAMPLES.map((g) => `${g.name} for ${g.model}`).join(", ")}
(--json: an array of reports, one per group; --html FILE: FILE-<group>.html for each).

options:
  --model NAME              model to replay for: window, tokenizer, prices (default ${REPLAY_DEFAULTS.model};
                            without files: each group's)
  --format F                body sent: anthropic | openai | openai-responses | gemini (default: the model's provider)
  --context-window N        the model's context window in tokens (default: the model table)
  --window N                turn option windowMessages: recent messages kept (default 40)
  --window-step N           turn option windowStep (default 20)
  --budget N                turn option budgetTokens (default: the effective window)
  --tool-compression X      none | minify | truncate | aggressive
  --mask-keep N             turn option maskKeep: newest tool results kept whole (default 3)
  --cache-ttl S             turn option cacheTtlSeconds
  --gap S                   seconds between model calls (default ${REPLAY_DEFAULTS.gapSeconds})
  --sliding N               messages kept by the sliding-window baseline (default ${REPLAY_DEFAULTS.slidingMessages})
  --sessions N              replay at most N sessions (default all)
  --config FILE             a ctxd.yaml (its defaults apply as the worker's would)
  --json                    print JSON instead of the table
  --html FILE               also write a self-contained HTML report: the cost with and without
                            ctxd and why, then charts (e.g. /tmp/ctxd-replay.html; report.html
                            and *.replay.html are git-ignored)
  -h, --help                this text

exit codes: 0 ok, 1 failed (orphaned tool pairs, a rejected turn, nothing to replay, a config error), 2 usage`

/** `ctxd gateway --help`. */
export const gateway = `usage: ctxd gateway [options]

serves the providers' own APIs (Anthropic Messages, OpenAI Chat Completions and Responses, Gemini
generateContent) in front of ctxd: point an agent's base URL at it and it gets ctxd's prompts
(mode active), or keeps its own while ctxd prices what it would have sent (mode shadow). With a
ctxd worker answering on NATS it is a stateless front door of the fleet; with none it runs the
turns in this process (sessions in memory). It prints the variables to set, then serves until
SIGTERM or SIGINT (Ctrl-C). Per-request policy (modes per tenant and agent, failure policy,
gateway keys) is the gateway section of ctxd.yaml, reloaded live (docs/gateway.md).

options:
  --port N                  port (default CTXD_GATEWAY_PORT, 8787; 0: any free port)
  --host H                  address to bind (default CTXD_GATEWAY_HOST, 127.0.0.1)
  --mode M                  active | shadow | off where the gateway section names none (default active)
  --fleet F                 auto | nats | in-process (default CTXD_GATEWAY_FLEET, auto: nats when a
                            worker answers on NATS_URL, else in-process)
  --shadow-file FILE        append shadow records (JSON Lines, no prompt text) to FILE
                            (default CTXD_GATEWAY_SHADOW_FILE); read them with ctxd inspect --shadow FILE
  -h, --help                this text

environment: NATS_URL, CTXD_SUBJECT_ROOT, CTXD_CONFIG_FILE, CTXD_GATEWAY_UPSTREAM_ANTHROPIC,
CTXD_GATEWAY_UPSTREAM_OPENAI, CTXD_GATEWAY_UPSTREAM_GOOGLE (docs/configuration.md, Gateway)

exit codes: 0 stopped by a signal, 1 failed to start (a bad config, the port taken), 2 usage`

/** `ctxd serve --help` (and `npm start -- --help`). */
export const serve = `usage: ctxd serve        (same as npm start)

runs the worker until SIGTERM, SIGINT (Ctrl-C) or SIGHUP (its terminal closed), or until the
process that started it exits;
then it stops taking turns, finishes those in flight, releases its shards and exits 0.
No options: it is configured by the environment and a ctxd.yaml (docs/configuration.md), e.g.
  DATABASE_URL              Postgres (default: an embedded PostgreSQL when nothing answers on 127.0.0.1:5432)
  CTXD_DB_SCHEMA            Postgres schema, created and migrated at start (default public)
  NATS_URL                  NATS with JetStream (default nats://127.0.0.1:4222)
  CTXD_SUBJECT_ROOT         first token of every subject (default ctx)
  CTXD_HTTP_PORT            /metrics, /healthz, /readyz; 0 = none (default 9464)
  CTXD_CONFIG_FILE          the configuration file (default none)
  LOG_LEVEL                 pino level (default info)

options:
  -h, --help                this text`

/** `ctxd inspect --help`. */
export const inspect = `usage: ctxd inspect <tenant> <session> [--turn ID] [--json]
       ctxd inspect --shadow FILE [<tenant> [<session>]] [--json]

what was stored and sent for a turn, read from Postgres (DATABASE_URL, CTXD_DB_SCHEMA).
With --shadow: the shadow records a gateway appended to FILE (ctxd gateway --shadow-file), per
tenant and session: requests, what the client's bodies and ctxd's would cost with caching, and
the projected saving.

options:
  --turn ID                 the turn (default the newest)
  --shadow FILE             read a gateway's shadow records instead of the database
  --json                    print JSON instead of text
  -h, --help                this text

exit codes: 0 ok, 1 unknown session or turn or an unreadable database, 2 usage`

/** `ctxd config --help`. */
export const config = `usage: ctxd config check <file>

validates a ctxd.yaml offline (each problem with its key path and line).

options:
  -h, --help                this text

exit codes: 0 valid, 1 not valid, 2 usage`

/** `ctxd help`, `ctxd --help`. */
export const ctxd = `ctxd — context engine for LLM agents

usage:
  ctxd replay [files or dirs...] [options]   replay recorded agent logs in-process (no servers;
                                              without files: the bundled samples)
  ctxd serve                                  run the worker (same as npm start)
  ctxd gateway [--port N] [--mode M]          the providers' APIs in front of ctxd (point a base URL at it)
  ctxd inspect <tenant> <session> [--turn ID] [--json]
                                              what was stored and sent for a turn (Postgres: DATABASE_URL, CTXD_DB_SCHEMA)
  ctxd inspect --shadow FILE [<tenant> [<session>]] [--json]
                                              a gateway's shadow records: each body's cost, the projected saving
  ctxd config check <file>                    validate a ctxd.yaml offline
  ctxd help                                   this text

\`ctxd <command> --help\` (or -h) prints a command's usage and options and does nothing else.

${replay.slice(replay.indexOf("replays")).replace("\noptions:", "\nreplay options:")}`

/** Whether `args` ask for help (`--help` or `-h` before any `--`). */
export const asked = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === "--help" || arg === "-h")
}
