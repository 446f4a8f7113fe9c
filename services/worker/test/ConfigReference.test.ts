import { ContextClient } from "@ctxd/client"
import { CompactorConfig } from "@ctxd/compactor"
import { ConfigFile, ConfigReference } from "@ctxd/config"
import { Pipeline } from "@ctxd/context"
import { Database } from "@ctxd/db"
import { LoopConfig } from "@ctxd/loop-detector"
import { Admission, PayloadStore } from "@ctxd/nats"
import { ShardingConfig } from "@ctxd/sharding"
import { SummarizerConfig } from "@ctxd/summarizer"
import { TokenCounterConfig } from "@ctxd/token-counter"
import { Config, ConfigProvider, Effect, Either, Redacted, SchemaAST } from "effect"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as ConfigGroups from "../src/ConfigGroups.ts"
import { pagePath, render, repositoryRoot } from "../src/ConfigReferencePage.ts"
import * as ConfigSources from "../src/ConfigSources.ts"
import { WorkerConfig } from "../src/WorkerConfig.ts"

// As `npm run docs:config` renders it: the worker's sources and the client library's.
const sources = [...ConfigSources.sources, { component: "client (libs/client)", configs: [ContextClient.config] }]

const files = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) return files(path)
    return path.endsWith(".ts") && !path.endsWith(".test.ts") ? [path] : []
  })

// The test tooling (libs/testing, libs/testcontainers) reads variables of its own; no ctxd process does.
const sourceDirs = ["libs", "services"].flatMap((top) =>
  readdirSync(join(repositoryRoot, top))
    .filter((name) => name !== "testing" && name !== "testcontainers")
    .map((name) => join(repositoryRoot, top, name, "src")),
)

const READ =
  /Config\.(?:string|integer|number|boolean|redacted|duration|url|port|nonEmptyString|secret)\(\s*"([A-Z][A-Z0-9_]*)"|Config\.literal\([^)]*\)\(\s*"([A-Z][A-Z0-9_]*)"|Config\.array\([^,]+,\s*"([A-Z][A-Z0-9_]*)"|process\.env(?:\.([A-Z][A-Z0-9_]*)|\[\s*"([A-Z][A-Z0-9_]*)"\s*\])|\b(?:int|integer|fraction|positive|percent|text|optionalUrl|optionalKey|optionalString|optionalFile|optionalSecret|optional|share)\(\s*"([A-Z][A-Z0-9_]*)"/g

/** The text without comments (a doc comment may show a read as an example). */
const code = (text: string): string => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")

/** Every variable name the sources read through `Config` (or a local helper over it) or `process.env`. */
const namesRead = (): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const dir of sourceDirs) {
    let all: Array<string> = []
    try {
      all = files(dir)
    } catch {
      continue
    }
    for (const file of all) {
      for (const match of code(readFileSync(file, "utf8")).matchAll(READ)) {
        const name = match.slice(1).find((group) => group !== undefined)
        if (name !== undefined) names.add(name)
      }
    }
  }
  return names
}

/** One table row of the page: its key (the first cell's code) and its cells. */
interface PageRow {
  readonly key: string
  readonly cells: ReadonlyArray<string>
}

const page = readFileSync(join(repositoryRoot, pagePath), "utf8")
const [envPart, filePart] = page.split("## `ctxd.yaml` keys") as [string, string]

const tableRows = (text: string): ReadonlyArray<PageRow> =>
  text
    .split("\n")
    .filter((line) => /^\| `/.test(line))
    .map((line) => {
      const cells = line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim())
      return { key: /^`([^`]+)`/.exec(cells[0]!)![1]!, cells }
    })

/** The variables' rows: variable, type, default, meaning. */
const envRows = new Map(tableRows(envPart).map((row) => [row.key, row]))
/** The section keys' rows (key, type, default, meaning), relative to their section. */
const keyRows = tableRows(filePart).filter((row) => row.cells.length === 4)

/** The first value in code quotes of a default cell (`` `1048576` (1 MiB) `` is `1048576`). */
const documentedDefault = (cell: string): string | undefined => /`([^`]*)`/.exec(cell)?.[1]

/** A page key as a pattern: `<provider>` stands for any one segment. */
const pattern = (key: string): RegExp => new RegExp(`^${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/<[^>]+>/g, "[^.]+")}$`)

const documentsKey = (path: string): PageRow | undefined => keyRows.find((row) => pattern(row.key).test(path))

/** Every leaf key path of a decoded file's sections, a record's keys as `<id>`. */
const schemaPaths = (ast: SchemaAST.AST, prefix: string): ReadonlyArray<string> => {
  const flat = (t: SchemaAST.AST): ReadonlyArray<SchemaAST.AST> => (SchemaAST.isUnion(t) ? t.types.flatMap(flat) : [t])
  const members = flat(ast).filter((m) => !SchemaAST.isUndefinedKeyword(m))
  const structs = members.filter(SchemaAST.isTypeLiteral)
  if (structs.length === 0 || structs.length !== members.length) return [prefix.replace(/\.$/, "")]
  return structs.flatMap((s) => [
    ...s.propertySignatures.flatMap((p) => schemaPaths(p.type, `${prefix}${String(p.name)}.`)),
    ...s.indexSignatures.flatMap((i) => schemaPaths(i.type, `${prefix}<id>.`)),
  ])
}

/** The key path inside its section: `tenants.<id>.share.turnsPercent` is `share.turnsPercent`. */
const inSection = (path: string): string => path.replace(/^(defaults|tenants\.[^.]+|agents\.[^.]+)\./, "")

/** The value each config takes with nothing set: what the code uses by default. */
const atDefaults = <A>(config: Config.Config<A>): A => Effect.runSync(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map())))

describe("ConfigReference", () => {
  it(`${pagePath} is what npm run docs:config writes`, async () => {
    expect(page === (await render(sources)), "stale: run npm run docs:config").toBe(true)
  })

  it("lists every variable the sources read, each with a type, a default and a meaning", () => {
    const read = namesRead()
    expect(read.size).toBeGreaterThan(100)
    expect([...read].filter((name) => !envRows.has(name))).toEqual([])
    const incomplete = [...envRows.values()].filter((row) => row.cells.length !== 4 || row.cells.slice(1).some((c) => c === ""))
    expect(incomplete.map((row) => row.key)).toEqual([])
  })

  it("puts every variable in exactly one section of the page", () => {
    const names = ConfigSources.rows(sources).map((row) => row.name)
    expect(ConfigGroups.unplaced(names)).toEqual({ ungrouped: [], unknown: [] })
    const grouped = ConfigGroups.groups.flatMap((g) => g.names)
    expect(grouped.filter((name, i) => grouped.indexOf(name) !== i)).toEqual([])
  })

  it("lists every ctxd.yaml section key the file's Schema takes, each with a type, a default and a meaning", () => {
    const paths = schemaPaths(ConfigFile.Sections.ast, "")
    expect(paths.length).toBeGreaterThan(60)
    expect(paths.filter((path) => documentsKey(inSection(path)) === undefined)).toEqual([])
    const incomplete = paths
      .map((path) => documentsKey(inSection(path))!)
      .filter((row) => row.cells.slice(1).some((c) => c === "" || c === "—"))
    expect(incomplete.map((row) => row.key)).toEqual([])
    for (const section of ["defaults", "tenants.<tenant>", "agents.<agent>"]) expect(filePart).toContain(`\`${section}\``)
  })

  it("documents every key of deploy/ctxd.example.yaml", () => {
    const file = join(repositoryRoot, "deploy/ctxd.example.yaml")
    const decoded = ConfigFile.decode(readFileSync(file, "utf8"), file)
    if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
    const leaves = (value: unknown, prefix: string): ReadonlyArray<string> =>
      typeof value === "object" && value !== null && !Array.isArray(value)
        ? Object.entries(value).flatMap(([k, v]) => leaves(v, `${prefix}${k}.`))
        : [prefix.replace(/\.$/, "")]
    const { knobs, defaults, tenants, agents } = decoded.right
    expect(Object.keys(knobs).filter((name) => !envRows.has(name))).toEqual([])
    const keys = [
      ...leaves(defaults, ""),
      ...Object.values(tenants).flatMap((t) => leaves(t, "")),
      ...Object.values(agents).flatMap((a) => leaves(a, "")),
    ]
    expect(keys.length).toBeGreaterThan(5)
    expect(keys.filter((key) => documentsKey(key) === undefined)).toEqual([])
  })

  it("shows the defaults the code uses when nothing is set", () => {
    const worker = atDefaults(WorkerConfig)
    const compactor = atDefaults(CompactorConfig.config)
    const used: Record<string, unknown> = {
      CTXD_MAX_CONCURRENT: worker.maxConcurrent,
      CTXD_COMMIT_BATCH: worker.commitBatch,
      CTXD_SESSION_MAILBOX: worker.mailbox,
      CTXD_WINDOW_MESSAGES: worker.windowMessages,
      CTXD_PREFIX_CACHE_BYTES: worker.prefixCacheBytes,
      CTXD_HTTP_PORT: worker.httpPort,
      CTXD_CONFIG_POLL_MS: worker.configPollMs,
      CTXD_LOOP_POLICY: worker.loopPolicy,
      LOG_LEVEL: worker.logLevel,
      CTXD_MAX_INFLIGHT_BYTES: atDefaults(Admission.config),
      CTXD_TENANT_TURNS_PERCENT: atDefaults(Admission.shareConfig).turnsPercent,
      CTXD_PAYLOAD_STORE_MAX_BYTES: atDefaults(PayloadStore.config).maxBucketBytes,
      DATABASE_URL: ((url) => (Redacted.isRedacted(url) ? Redacted.value(url) : url))(atDefaults(Database.config).url),
      CTXD_DB_POOL_MAX: atDefaults(Database.config).poolMax,
      CTXD_SHARDS: atDefaults(ShardingConfig.config).shards,
      CTXD_TOKEN_TIMEOUT_MS: atDefaults(TokenCounterConfig.config).timeoutMs,
      CTXD_COMPACT_AT_PCT: compactor.thresholds.compactAtPct,
      CTXD_COMPACT_LEASE_TTL_MS: compactor.leaseTtlMs,
      CTXD_SUMMARIZER_MODE: atDefaults(SummarizerConfig.config).mode,
      CTXD_CLIENT_RETRY_FOR_MS: atDefaults(ContextClient.config).retryForMs,
    }
    const shown = Object.fromEntries(Object.keys(used).map((name) => [name, documentedDefault(envRows.get(name)!.cells[2]!)]))
    expect(shown).toEqual(Object.fromEntries(Object.entries(used).map(([name, value]) => [name, String(value)])))
    // a section key's default: the code's, or its variable's
    const keyDefault = (key: string) => documentedDefault(keyRows.find((row) => row.key === key)!.cells[2]!)
    expect(keyDefault("maskKeep")).toBe(String(Pipeline.defaults.maskKeep))
    expect(keyDefault("toolCompression")).toBe(Pipeline.defaults.toolCompression)
    expect(keyDefault("loop.repeatedCall.threshold")).toBe(String(LoopConfig.defaults.repeatedCall.threshold))
    expect(keyDefault("windowMessages")).toBe(String(worker.windowMessages))
    expect(keyDefault("loop.policy")).toBe(worker.loopPolicy)
  })

  it("shows a type as a user reads it", () => {
    const type = (name: string) => envRows.get(name)!.cells[1]
    expect(type("CTXD_TENANT_BYTES_PERCENT")).toBe("percent 1–100")
    expect(type("CTXD_CONFIG_POLL_MS")).toBe("duration (ms) ≥ 100")
    expect(type("CTXD_COMPACT_AT_PCT")).toBe("fraction > 0 and ≤ 1")
    expect(type("CTXD_LOOP_POLICY")).toBe("one of: `nudge` \\| `escalate` \\| `off`")
    expect(type("CTXD_LEGACY_SUBJECTS")).toBe("boolean")
    expect(keyRows.find((row) => row.key === "windowMessages")!.cells[1]).toBe("integer 1–1000000")
    expect(page).not.toMatch(/greaterThanOrEqualTo|between\(|a string matching/)
    // the range shown is the range validated
    const percent = ConfigReference.within({ min: 1, max: 100 })(Config.integer("P"))
    const read = (value: string) =>
      Effect.runSync(Effect.either(Effect.withConfigProvider(percent, ConfigProvider.fromMap(new Map([["P", value]])))))
    expect(Either.isRight(read("100"))).toBe(true)
    expect(Either.isLeft(read("101"))).toBe(true)
    expect(ConfigReference.knobs(percent)[0]!.range).toEqual({ min: 1, max: 100 })
  })
})
