/**
 * The configuration reference page (`docs/configuration.md`), rendered from
 * the code: the environment variables from `ConfigSources` (the `Config`
 * values the processes read), grouped by `ConfigGroups`; the `ctxd.yaml`
 * section keys from the Schemas the file is decoded with (`ConfigFileKeys`).
 * The prose above the tables is {@link intro}.
 */
import { ConfigFile, ConfigReference, RuntimeConfig } from "@ctxd/config"
import { Tenants, Turn } from "@ctxd/contracts"
import { SchemaAST } from "effect"
import { fileURLToPath } from "node:url"
import * as prettier from "prettier"
import * as ConfigFileKeys from "./ConfigFileKeys.ts"
import * as ConfigGatewayKeys from "./ConfigGatewayKeys.ts"
import * as ConfigGroups from "./ConfigGroups.ts"
import * as ConfigSources from "./ConfigSources.ts"

const root = fileURLToPath(new URL("../../../", import.meta.url))

/** Where the page lives, relative to the repository root. */
export const pagePath = "docs/configuration.md"

const cell = (text: string): string => text.replace(/\|/g, "\\|").replace(/\s+/g, " ").trim()

/** Prose in a cell: `<root>` and the like stay visible instead of reading as HTML. */
const prose = (text: string): string => cell(text).replace(/</g, "\\<")

const anchor = (title: string): string =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, "")
    .replace(/ /g, "-")

const { limits } = ConfigFile
const reload = RuntimeConfig.defaults

/** The hand-written part: where the settings come from, how they combine, what reloads. */
const intro = (groups: ReadonlyArray<ConfigGroups.Group>): ReadonlyArray<string> => [
  "ctxd is configured by environment variables and by one optional file, `ctxd.yaml`. Every setting,",
  "its type, its default and what it does is below: [environment variables](#environment-variables) by",
  `topic (${groups.map((g) => `[${g.title.toLowerCase()}](#${anchor(g.title)})`).join(", ")}), then the`,
  "[`ctxd.yaml` keys](#ctxdyaml-keys).",
  "",
  "## Where settings come from",
  "",
  "**`ctxd.yaml`** is the file `CTXD_CONFIG_FILE` names (a path relative to the working directory; YAML, and",
  "so JSON too). There is no search path: without `CTXD_CONFIG_FILE` no file is read. It holds two kinds of",
  "keys: any environment variable of this page under its own name (`CTXD_MAX_CONCURRENT: 8`; a list is",
  "the comma-separated string the environment would hold), and the sections `defaults`, `tenants` and",
  "`agents` of [turn options](#turn-options). `CTXD_TENANTS_FILE` may hold the `tenants` section in a file",
  "of its own. `deploy/ctxd.example.yaml` shows every kind of key.",
  "",
  "**Precedence.** For an environment variable: the environment, then the same key in `ctxd.yaml`, then the",
  "default below. For a turn option, lowest first and field by field (`loop` merges field by field too): the",
  "environment's default (`CTXD_WINDOW_MESSAGES`, ...) < the file's `defaults` < `tenants.<tenant>` <",
  "`agents.<agent>` < the request's own `options`. A tenant named in both files takes the section of",
  "`CTXD_TENANTS_FILE`, whole.",
  "",
  "## Hot reload",
  "",
  "**What reloads:** the sections `defaults`, `tenants` and `agents` of both files. The worker watches the",
  "files' directories (a file replaced by a rename, a symlink retargeted, a Kubernetes ConfigMap are",
  `followed), reloads \`CTXD_CONFIG_DEBOUNCE_MS\` (${reload.debounceMs} ms) after the last event and re-stats the`,
  `files every \`CTXD_CONFIG_POLL_MS\` (${reload.pollMs} ms). A changed, valid file applies from the next turn; each`,
  "turn keeps the snapshot it started with, and no session state is dropped.",
  "",
  "**What needs a restart:** every environment variable, whether set in the environment or in `ctxd.yaml`",
  "(in particular the connections, the flow limits, the caches, the token counter, the compactor, the",
  "summarizer and `CTXD_CONFIG_FILE` itself). A change of one in the file is logged as",
  "`config: <KEYS> changed; read at start, needs a restart`, or as not applying when the environment sets",
  "it. For a turn option that should change live, set it under `defaults` rather than by its variable.",
  "",
  "**A bad edit** (invalid, deleted or unreadable file) changes nothing: the worker keeps the last good",
  "configuration and logs `config not applied, keeping <hash>: <file>:<line>:<col>: <key path>: <problem>`;",
  'the next valid edit applies. Reloads count in `ctxd_config_reloads_total{result="applied"|"rejected"}` and',
  "show in `config: {hash, reloads, rejected}` of `/readyz` and `ctx.v1.health` (the hash is the first 12 hex",
  "digits of a SHA-256 of the decoded contents: a comment edit does not change it). At start, an invalid",
  "file stops the worker with the same messages. Unknown keys in the sections are errors, tenant and agent",
  `ids must be \`[A-Za-z0-9_-]{1,128}\`, and a file over ${limits.maxBytes} bytes, nested over ${limits.maxDepth} levels or of more`,
  `than ${limits.maxNodes} nodes once its aliases are expanded is refused; a reload parses on a worker thread, abandoned`,
  `after ${reload.reloadTimeoutMs} ms. Messages never quote a value of the file.`,
  "",
  "## Checking a file: `ctxd config check`",
  "",
  "`npx ctxd config check ctxd.yaml` (or `npm run config:check -- ctxd.yaml`) validates a file offline: its",
  "sections as a reload does, its environment keys with the readers the worker starts with",
  "(`CTXD_MAX_CONCURRENT: many` → `ctxd.yaml:2:1: CTXD_MAX_CONCURRENT: Expected an integer value but received",
  '"many"`), and the `CTXD_TENANTS_FILE` it names; it prints the hash a worker would report. Exit code 0',
  "valid, 1 not valid, 2 no file named.",
  "",
  "## The `ctxd` command",
  "",
  "`ctxd serve` (`npm start`) takes no options: it reads everything on this page. `ctxd inspect` reads",
  "`DATABASE_URL` and `CTXD_DB_SCHEMA`. `ctxd replay --config ctxd.yaml` applies a file's turn option",
  "sections to the replayed turns as the worker would; its other options are on `ctxd replay --help`. The",
  "client library reads the variables of [its section](#client-library) in the caller's process.",
  "",
]

/** The page's markdown from `sources` (`ConfigSources.sources` and the client library's), before formatting. */
export const markdown = (sources: ReadonlyArray<ConfigSources.Source>): string => {
  const rows = ConfigSources.rows(sources)
  const byName = new Map(rows.map((row) => [row.name, row]))
  const { ungrouped, unknown } = ConfigGroups.unplaced(rows.map((row) => row.name))
  if (ungrouped.length > 0 || unknown.length > 0) {
    throw new Error(`ConfigGroups: no section for ${ungrouped.join(", ") || "-"}; no such variable: ${unknown.join(", ") || "-"}`)
  }
  const lines: Array<string> = [
    "# Configuration reference",
    "",
    "<!-- Generated by `npm run docs:config` from the code (services/worker/src/ConfigReferencePage.ts); do not edit. -->",
    "",
    ...intro(ConfigGroups.groups),
    "## Environment variables",
    "",
    "Types: a duration is a whole number in the unit shown, a size a whole number of bytes, a fraction a number",
    "between 0 and 1; a value outside the range shown stops the start, naming the variable. Every variable is",
    "read once, at start.",
    "",
  ]
  for (const group of ConfigGroups.groups) {
    lines.push(`### ${group.title}`, "", group.intro, "", "| variable | type | default | meaning |", "| --- | --- | --- | --- |")
    for (const name of group.names) {
      const row = byName.get(name)!
      // every component but the client library runs in the worker process: only the client is worth naming
      const client = row.components.slice(1).some((c) => c.startsWith("client")) && !/client library/.test(row.description)
      const also = client ? ". The client library reads it too" : ""
      lines.push(
        `| \`${row.name}\` | ${cell(ConfigReference.formatType(row))} | ${cell(ConfigReference.formatKnobDefault(row))} | ${prose(row.description)}${also} |`,
      )
    }
    lines.push("")
  }
  lines.push(...fileKeys(byName))
  return lines.join("\n")
}

const table = (rows: ReadonlyArray<ConfigFileKeys.KeyRow>): ReadonlyArray<string> => [
  "| key | type | default | meaning |",
  "| --- | --- | --- | --- |",
  ...rows.map((r) => `| \`${r.key}\` | ${cell(r.type)} | ${cell(r.default === "" ? "—" : r.default)} | ${prose(r.meaning)} |`),
]

/** The `ctxd.yaml` part: the top-level keys, the turn options, the tenant-only keys. */
const fileKeys = (byName: ReadonlyMap<string, ConfigSources.Row>): ReadonlyArray<string> => {
  const resolve = (value: string | ConfigFileKeys.FromEnv): string => {
    if (typeof value === "string") return value
    const row = byName.get(value.env)
    if (row === undefined) throw new Error(`ConfigFileKeys.defaults: no variable ${value.env}`)
    return `${row.default.replace(/^unset: /, "")} (\`${value.env}\`)`
  }
  const src = (file: string) => `${root}libs/contracts/src/${file}`
  const docs = new Map([
    ...ConfigFileKeys.jsdocs(src("Turn.ts"), "Options"),
    ...ConfigFileKeys.jsdocs(src("Loop.ts"), "Settings", "loop."),
    ...ConfigFileKeys.jsdocs(src("Tenants.ts"), "Tenant"),
    ...ConfigFileKeys.jsdocs(src("Tenants.ts"), "ProviderKeys", "providers."),
    ...ConfigFileKeys.jsdocs(src("Tenants.ts"), "ProviderKey", "providers.*."),
    ...ConfigFileKeys.jsdocs(src("Tenants.ts"), "Share", "share."),
  ])
  const sectionDocs = ConfigFileKeys.jsdocs(`${root}libs/config/src/ConfigFile.ts`, "Sections")
  const tenantOnly = SchemaAST.isTypeLiteral(Tenants.Tenant.ast)
    ? new SchemaAST.TypeLiteral(
        Tenants.Tenant.ast.propertySignatures.filter((p) => !(String(p.name) in Turn.Options.fields)),
        [],
      )
    : Tenants.Tenant.ast
  const sections = SchemaAST.isTypeLiteral(ConfigFile.Sections.ast) ? ConfigFile.Sections.ast.propertySignatures : []
  const placeholder: Record<string, string> = { tenants: ".<tenant>", agents: ".<agent>" }
  return [
    "## `ctxd.yaml` keys",
    "",
    "| key | holds | applies |",
    "| --- | --- | --- |",
    "| `NATS_URL`, `CTXD_*`, ... (upper case) | any [environment variable](#environment-variables) by its name: a string, number, boolean or list | at start; the environment wins |",
    ...sections.map((p) => {
      const name = String(p.name)
      const applies = name === "gateway" ? "each request (reloaded; `upstreams` at start)" : "each turn (reloaded)"
      return `| \`${name}${placeholder[name] ?? ""}\` | ${prose(sectionDocs.get(name) ?? "")} | ${applies} |`
    }),
    "",
    "### Turn options",
    "",
    "The keys of `defaults`, `tenants.<tenant>` and `agents.<agent>`: the same names and values as a request's",
    "`options` (`TurnOptions` in `docs/schemas/turn-request.schema.json`). An agent's section cannot set `agent`.",
    "The default is what a turn gets when no layer sets the key. The feature switches are turn options too, so any",
    "layer can set them per tenant or agent: `promptCache`, `compaction`, `loop.policy: off`, `tokenBackend`",
    "(`heuristic` or `tiktoken`: no provider count calls), `toolCompression: none`, `maskKeep`, `proactiveThreshold`.",
    "",
    ...table(ConfigFileKeys.rows(Turn.Options.ast, docs, resolve)),
    "",
    "### Tenant sections only",
    "",
    "A `tenants.<tenant>` section (also each value of a `CTXD_TENANTS_FILE`) takes these keys besides the turn options:",
    "",
    ...table(ConfigFileKeys.rows(tenantOnly, docs, resolve)),
    "",
    "### Gateway section",
    "",
    "What `ctxd gateway` does with each request ([docs/gateway.md](gateway.md)). A request's mode and failure policy,",
    "lowest first and key by key: `gateway` < `gateway.tenants.<tenant>` < `gateway.agents.<agent>` <",
    "`gateway.tenants.<tenant>.agents.<agent>` (the agent is the `x-ctxd-agent` header, else `default`). A gateway key",
    "is never written in the file: its SHA-256, or the variable or file that holds it (read again every 30 s).",
    "",
    ...table(ConfigGatewayKeys.rows(`${root}libs/config/src/GatewaySection.ts`)),
    "",
  ]
}

/** The page as `npm run docs:config` writes it: {@link markdown} formatted with the repository's prettier settings. */
export const render = async (sources: ReadonlyArray<ConfigSources.Source>): Promise<string> => {
  const file = `${root}${pagePath}`
  const options = (await prettier.resolveConfig(file)) ?? {}
  return prettier.format(markdown(sources), { ...options, filepath: file })
}

/** The repository root (with a trailing slash). */
export const repositoryRoot = root
