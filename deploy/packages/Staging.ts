/**
 * A published package's staging directory (`dist/packages/<dir>`): the
 * bundle, the manifest written for the registry (the workspace's own
 * package.json keeps exporting its `.ts` sources for the repository), the
 * assets, README and LICENSE; then `npm pack` of it.
 */
import { execFileSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { type Bundled, bundle } from "./Bundle.ts"
import { manifestOf, type Published, ROOT, STAGING, workspaceDirs } from "./Packages.ts"

/** The third-party dependencies declared by `dir` and by the workspace packages it depends on, recursively, except `skip`. */
const declaredBelow = (dir: string, skip: (name: string) => boolean, into = new Map<string, string>(), seen = new Set<string>()) => {
  if (seen.has(dir)) return into
  seen.add(dir)
  const dirs = workspaceDirs()
  for (const [name, range] of Object.entries(manifestOf(dir).dependencies ?? {})) {
    const workspace = dirs.get(name)
    if (workspace !== undefined) {
      if (!skip(name)) declaredBelow(workspace, skip, into, seen)
      continue
    }
    const before = into.get(name)
    if (before !== undefined && before !== range) throw new Error(`${name} is declared as ${before} and as ${range} (${dir}): align them`)
    into.set(name, range)
  }
  return into
}

/**
 * The manifest's dependencies: every third-party dependency the workspace
 * package itself declares, each third-party package the bundle or its
 * declarations import (at the range a bundled workspace package declares
 * it), and the published packages it uses at their exact version. An import
 * nothing declares fails the build.
 */
export const dependenciesOf = (pkg: Published, bundled: Bundled): Record<string, string> => {
  const uses = new Set(pkg.uses ?? [])
  const dirs = workspaceDirs()
  const below = declaredBelow(pkg.workspace, (name) => uses.has(name))
  const deps = new Map<string, string>()
  for (const [name, range] of Object.entries(manifestOf(pkg.workspace).dependencies ?? {})) if (!dirs.has(name)) deps.set(name, range)
  for (const name of [...bundled.imports, ...bundled.typeImports]) {
    if (uses.has(name)) deps.set(name, manifestOf(dirs.get(name)!).version)
    else if (below.has(name)) deps.set(name, below.get(name)!)
    else throw new Error(`${pkg.name} imports ${name}, which no package.json it is built from declares`)
  }
  return Object.fromEntries([...deps].sort(([a], [b]) => a.localeCompare(b)))
}

/** The package.json published for `pkg`. */
export const manifest = (pkg: Published, bundled: Bundled): Record<string, unknown> => {
  const root = manifestOf(".")
  const own = manifestOf(pkg.workspace)
  const exports: Record<string, unknown> = { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" }, ...pkg.extraExports }
  exports["./package.json"] = "./package.json"
  return {
    name: pkg.name,
    version: own.version,
    description: own.description,
    license: root.license,
    type: "module",
    repository: root.repository === undefined ? undefined : { ...root.repository, directory: pkg.workspace },
    engines: root.engines,
    ...(pkg.bin === undefined ? {} : { bin: Object.fromEntries(Object.entries(pkg.bin).map(([cmd, entry]) => [cmd, `dist/${entry}.js`])) }),
    exports,
    types: "./dist/index.d.ts",
    files: ["dist", ...(pkg.assets ?? []).map((a) => a.to).filter((to) => to !== "README.md")],
    dependencies: dependenciesOf(pkg, bundled),
    // a scoped package is private on its first publish unless told otherwise
    publishConfig: { access: "public" },
  }
}

const readme = (pkg: Published): string =>
  [
    `# ${pkg.name}`,
    "",
    manifestOf(pkg.workspace).description ?? "",
    "",
    "Part of ctxd, a context engine for LLM agents. Installation, exports and examples:",
    "docs/packages.md in the ctxd repository.",
    "",
  ].join("\n")

export interface Staged {
  readonly pkg: Published
  readonly dir: string
  readonly bundled: Bundled
}

/** Builds `pkg` into a fresh `<staging>/<pkg.dir>`. */
export const stage = async (pkg: Published, staging: string = STAGING): Promise<Staged> => {
  const dir = join(staging, pkg.dir)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const bundled = await bundle(pkg, dir)
  for (const asset of pkg.assets ?? []) {
    const from = join(ROOT, asset.from)
    if (!existsSync(from)) throw new Error(`${pkg.name}: asset ${asset.from} is missing`)
    cpSync(from, join(dir, asset.to), { recursive: true })
  }
  if (!existsSync(join(dir, "README.md"))) writeFileSync(join(dir, "README.md"), readme(pkg))
  cpSync(join(import.meta.dirname, "LICENSE"), join(dir, "LICENSE"))
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest(pkg, bundled), null, 2)}\n`)
  return { pkg, dir, bundled }
}

/** `npm pack`s a staged package into `destination`: the tarball's path and size in bytes. */
export const pack = (staged: Staged, destination: string): { readonly file: string; readonly bytes: number } => {
  mkdirSync(destination, { recursive: true })
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", destination], {
    cwd: staged.dir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  })
  const [info] = JSON.parse(out) as ReadonlyArray<{ readonly filename: string }>
  const file = join(destination, basename(info!.filename))
  return { file, bytes: statSync(file).size }
}
