/**
 * The packages ctxd publishes, and what goes into each: a JavaScript bundle
 * (esbuild) and one declaration file per entry (rollup-plugin-dts) built from
 * the workspace sources, plus the files the code reads at run time. The
 * internal workspace libraries (@ctxd/nats, @ctxd/db, @ctxd/context, ...)
 * are bundled into the packages that use them and never published on their
 * own; every third-party import stays a real dependency at the range its
 * workspace package.json declares. docs/packages.md explains the choices.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join, resolve } from "node:path"

export const ROOT = resolve(import.meta.dirname, "..", "..")

/** Where `npm run build` stages the packages (`<STAGING>/<dir>`) and `npm run pack` writes the tarballs. */
export const STAGING = join(ROOT, "dist", "packages")

/** A file or folder copied into the package: `from` relative to the repository root, `to` to the package root. */
export interface Asset {
  readonly from: string
  readonly to: string
}

export interface Published {
  /** The name on the registry. */
  readonly name: string
  /** The workspace package it is built from (relative to the root); its package.json gives version, description and dependencies. */
  readonly workspace: string
  /** Its folder under {@link STAGING}, and the stem of its tarball. */
  readonly dir: string
  /** Output name (in `dist/`) → source file relative to the workspace. */
  readonly entries: Readonly<Record<string, string>>
  /** Entries that get a declaration file `dist/<name>.d.ts` (the package's exports). */
  readonly typed: ReadonlyArray<string>
  /** Package exports beyond `.` (→ `dist/index.js`) and `./package.json`. */
  readonly extraExports?: Readonly<Record<string, string>>
  /** Command name → entry name. */
  readonly bin?: Readonly<Record<string, string>>
  readonly assets?: ReadonlyArray<Asset>
  /** Other published packages it depends on instead of bundling them (at the same version). */
  readonly uses?: ReadonlyArray<string>
  /**
   * Worker-thread scripts: a source file (relative to the root) that code
   * starts with `new URL("<spec>", import.meta.url)`; it becomes the entry
   * `<entry>` and the URL is rewritten to `./<entry>.js` (every output file
   * lies flat in `dist/`).
   */
  readonly threads?: ReadonlyArray<{ readonly file: string; readonly spec: string; readonly entry: string }>
  /**
   * Modules that must run before the third-party modules their importer
   * loads (a bundle hoists every external import above its own code): built
   * as an entry of their own and imported as `./<entry>.js`, which keeps
   * their place in the import order.
   */
  readonly first?: ReadonlyArray<{ readonly file: string; readonly entry: string }>
}

export const packages: ReadonlyArray<Published> = [
  {
    name: "@ctxd/contracts",
    workspace: "libs/contracts",
    dir: "ctxd-contracts",
    entries: { index: "src/index.ts" },
    typed: ["index"],
    // the wire contract's JSON Schemas (npm run schemas writes them to docs/schemas)
    extraExports: { "./schemas/*": "./schemas/*" },
    assets: [{ from: "docs/schemas", to: "schemas" }],
  },
  {
    name: "@ctxd/client",
    workspace: "libs/client",
    dir: "ctxd-client",
    entries: { index: "src/index.ts" },
    typed: ["index"],
    uses: ["@ctxd/contracts"],
  },
  {
    name: "@ctxd/testcontainers",
    workspace: "libs/testcontainers",
    dir: "ctxd-testcontainers",
    entries: { index: "src/index.ts" },
    typed: ["index"],
    assets: [{ from: "libs/testcontainers/README.md", to: "README.md" }],
  },
  {
    name: "ctxd",
    workspace: "services/worker",
    dir: "ctxd",
    entries: { ctxd: "bin/ctxd.ts", index: "src/index.ts" },
    typed: ["index"],
    bin: { ctxd: "ctxd" },
    assets: [
      // Migrations.directory is <its file>/../migrations: dist/../migrations
      { from: "libs/db/migrations", to: "migrations" },
      // the samples `ctxd replay` replays (found by walking up from dist/)
      { from: "examples", to: "examples" },
    ],
    threads: [{ file: "libs/config/src/RuntimeConfig.ts", spec: "./internal/loadThread.ts", entry: "config-load-thread" }],
    first: [{ file: "services/worker/src/V8Flags.ts", entry: "v8-flags" }],
  },
]

interface Manifest {
  readonly name: string
  readonly version: string
  readonly description?: string
  readonly license?: string
  readonly engines?: Readonly<Record<string, string>>
  readonly repository?: { readonly type: string; readonly url: string }
  readonly dependencies?: Readonly<Record<string, string>>
}

const manifests = new Map<string, Manifest>()
/** The package.json of the folder `dir` (relative to the root). */
export const manifestOf = (dir: string): Manifest => {
  let m = manifests.get(dir)
  if (m === undefined) manifests.set(dir, (m = JSON.parse(readFileSync(join(ROOT, dir, "package.json"), "utf8")) as Manifest))
  return m
}

/** The workspace packages under libs/ and services/: name → folder relative to the root. */
export const workspaceDirs = (): ReadonlyMap<string, string> => {
  const dirs = new Map<string, string>()
  for (const group of ["libs", "services"]) {
    for (const entry of readdirSync(join(ROOT, group)).sort()) {
      if (existsSync(join(ROOT, group, entry, "package.json"))) dirs.set(manifestOf(`${group}/${entry}`).name, `${group}/${entry}`)
    }
  }
  return dirs
}

/** The package name of an import specifier (`@scope/name/sub` → `@scope/name`, `name/sub` → `name`). */
export const packageName = (spec: string): string =>
  spec
    .split("/")
    .slice(0, spec.startsWith("@") ? 2 : 1)
    .join("/")
