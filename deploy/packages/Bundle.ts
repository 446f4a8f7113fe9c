/**
 * Builds one published package's code: the JavaScript with esbuild (ES
 * modules, code splitting so that the `ctxd` command still loads each
 * command's modules on use, every output file flat in `dist/`), and one
 * declaration file per typed entry with rollup-plugin-dts (the internal
 * workspace libraries' types inlined, third-party ones imported). Reports
 * which third-party packages the output imports, so that the manifest can
 * declare exactly those.
 */
import { build, type Plugin } from "esbuild"
import { readFileSync, statSync } from "node:fs"
import { isBuiltin } from "node:module"
import { basename, dirname, isAbsolute, join, resolve } from "node:path"
import { rollup, type RollupLog } from "rollup"
import { dts } from "rollup-plugin-dts"
import { packageName, type Published, ROOT, workspaceDirs } from "./Packages.ts"

export interface Bundled {
  /** Third-party packages the JavaScript imports, statically or dynamically. */
  readonly imports: ReadonlySet<string>
  /** Third-party packages the declarations import. */
  readonly typeImports: ReadonlySet<string>
  /** The files written under `dist/`, with their sizes in bytes. */
  readonly files: ReadonlyMap<string, number>
}

/** Whether the workspace package `name` is bundled into `pkg` (every workspace package but the published ones it uses). */
export const bundles =
  (pkg: Published) =>
  (name: string): boolean =>
    workspaceDirs().has(name) && !(pkg.uses ?? []).includes(name)

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Externals, worker-thread URLs and modules that load first (see {@link Published}). */
const plugin = (pkg: Published, inside: (name: string) => boolean): Plugin => ({
  name: "ctxd-package",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (isBuiltin(args.path) || !inside(packageName(args.path))) return { path: args.path, external: true }
      return undefined
    })
    for (const first of pkg.first ?? []) {
      const target = join(ROOT, first.file)
      b.onResolve({ filter: new RegExp(`${escape(basename(first.file))}$`) }, (args) =>
        args.kind !== "entry-point" && resolve(args.resolveDir, args.path) === target
          ? { path: `./${first.entry}.js`, external: true }
          : undefined,
      )
    }
    for (const thread of pkg.threads ?? []) {
      const file = join(ROOT, thread.file)
      b.onLoad({ filter: new RegExp(`${escape(basename(thread.file))}$`) }, (args) => {
        if (args.path !== file) return undefined
        const text = readFileSync(file, "utf8")
        const from = `new URL(${JSON.stringify(thread.spec)}, import.meta.url)`
        if (!text.includes(from)) throw new Error(`${thread.file} no longer has ${from}: update deploy/packages/Packages.ts`)
        return { contents: text.replaceAll(from, `new URL("./${thread.entry}.js", import.meta.url)`), loader: "ts" }
      })
    }
  },
})

/** Builds `pkg` into `<out>/dist`. */
export const bundle = async (pkg: Published, out: string): Promise<Bundled> => {
  const inside = bundles(pkg)
  const dist = join(out, "dist")
  const entryPoints: Record<string, string> = {}
  for (const [name, file] of Object.entries(pkg.entries)) entryPoints[name] = join(ROOT, pkg.workspace, file)
  for (const t of pkg.threads ?? []) entryPoints[t.entry] = resolve(ROOT, dirname(t.file), t.spec)
  for (const f of pkg.first ?? []) entryPoints[f.entry] = join(ROOT, f.file)

  const result = await build({
    entryPoints,
    outdir: dist,
    entryNames: "[name]",
    chunkNames: "chunk-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node24",
    metafile: true,
    logLevel: "warning",
    plugins: [plugin(pkg, inside)],
  })
  const imports = new Set<string>()
  const files = new Map<string, number>()
  for (const [path, output] of Object.entries(result.metafile.outputs)) {
    files.set(basename(path), output.bytes)
    for (const i of output.imports) {
      if (i.external && !i.path.startsWith(".") && !isBuiltin(i.path)) imports.add(packageName(i.path))
    }
  }

  const warnings: Array<string> = []
  const types = await rollup({
    input: Object.fromEntries(pkg.typed.map((name) => [name, entryPoints[name]!])),
    external: (id) => !id.startsWith(".") && !isAbsolute(id) && !inside(packageName(id)),
    plugins: [
      dts({
        respectExternal: true,
        tsconfig: join(ROOT, pkg.workspace, "tsconfig.json"),
        // workspace packages straight to their sources: reached through node_modules they count as
        // external libraries, and the plugin builds one TypeScript program per such file (slow)
        compilerOptions: {
          paths: Object.fromEntries([...workspaceDirs()].map(([name, dir]) => [name, [join(ROOT, dir, "src", "index.ts")]])),
        },
      }),
    ],
    onwarn: (warning: RollupLog) => void warnings.push(warning.message),
  })
  const { output } = await types.write({ dir: dist, format: "es", entryFileNames: "[name].d.ts", chunkFileNames: "types-[hash].d.ts" })
  await types.close()
  // a warning (an unresolved import, a circular re-export) would leave a type out: fail instead
  if (warnings.length > 0) throw new Error(`declarations of ${pkg.name}:\n${warnings.join("\n")}`)
  const typeImports = new Set<string>()
  for (const chunk of output) {
    if (chunk.type !== "chunk") continue
    files.set(chunk.fileName, statSync(join(dist, chunk.fileName)).size)
    for (const id of chunk.imports) if (!id.startsWith(".") && !isBuiltin(id)) typeImports.add(packageName(id))
  }
  return { imports, typeImports, files }
}
