/**
 * The module structure of the repository, read from the sources: every
 * TypeScript file's imports (from TypeScript's syntax tree, no type check),
 * the packages with their declared dependencies and layers, and the rules
 * `structure.test.ts` enforces, as functions of a file's path and its
 * imports so that the test can also run them on planted bad inputs.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import ts from "typescript"

export const ROOT = resolve(import.meta.dirname, "..")

export interface Import {
  readonly spec: string
  readonly line: number
}

export interface Package {
  readonly name: string
  /** Absolute path of the package directory. */
  readonly dir: string
  /** The folder it lives in: `libs`, `services`, or `test` (the integration tests' workspace). */
  readonly group: "libs" | "services" | "test"
  /** Its `dependencies` (what its `src` may import). */
  readonly dependencies: ReadonlySet<string>
  /** Its `dependencies` and `devDependencies` (what its tests and scripts may import). */
  readonly allDependencies: ReadonlySet<string>
  /** The subpaths its `exports` names besides its index (`/ConfigReference`): second faces, as light as the index is not. */
  readonly faces: ReadonlySet<string>
}

/** Every import specifier in `text`, in source order, with its 1-based line. */
export const importsIn = (text: string): ReadonlyArray<Import> => {
  const file = ts.createSourceFile("module.ts", text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: Array<Import> = []
  const add = (node: ts.Node | undefined): void => {
    if (node !== undefined && ts.isStringLiteralLike(node)) {
      found.push({ spec: node.text, line: file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1 })
    }
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node.moduleSpecifier)
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node.moduleReference.expression)
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal)
    else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === "require"))
    ) {
      add(node.arguments[0])
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

const parsed = new Map<string, ReadonlyArray<Import>>()
/** The imports of the file at `path` (each file is parsed once). */
export const importsOf = (path: string): ReadonlyArray<Import> => {
  let imports = parsed.get(path)
  if (imports === undefined) parsed.set(path, (imports = importsIn(readFileSync(path, "utf8"))))
  return imports
}

export const isSource = (name: string): boolean => /\.(?:c|m)?tsx?$/.test(name) && !name.endsWith(".d.ts")

/** TypeScript files under `dir`, recursively (no node_modules, no dot directories, no bench results). */
export const sourcesUnder = (dir: string): Array<string> => {
  const out: Array<string> = []
  let entries: Array<string>
  try {
    entries = readdirSync(dir)
  } catch {
    return out
  }
  for (const name of entries.sort()) {
    if (name === "node_modules" || name.startsWith(".") || name === "results") continue
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...sourcesUnder(path))
    else if (isSource(name)) out.push(path)
  }
  return out
}

const readPackage = (dir: string, group: Package["group"]): Package | undefined => {
  let text: string
  try {
    text = readFileSync(join(dir, "package.json"), "utf8")
  } catch {
    return undefined
  }
  const json = JSON.parse(text) as {
    name: string
    dependencies?: Record<string, string>
    devDependencies?: Record<string, string>
    exports?: Record<string, string | null>
  }
  const dependencies = Object.keys(json.dependencies ?? {})
  const faces = Object.entries(json.exports ?? {})
    .filter(([path, target]) => path !== "." && target !== null && !path.includes("*"))
    .map(([path]) => path.slice(1))
  return {
    name: json.name,
    dir,
    group,
    dependencies: new Set(dependencies),
    allDependencies: new Set([...dependencies, ...Object.keys(json.devDependencies ?? {})]),
    faces: new Set(faces),
  }
}

/** The workspace packages under libs/ and services/ (the ones with a `src`). */
export const packages: ReadonlyArray<Package> = (["libs", "services"] as const).flatMap((group) =>
  readdirSync(join(ROOT, group))
    .sort()
    .flatMap((name) => readPackage(join(ROOT, group, name), group) ?? []),
)

/** Every workspace package, the integration tests' too. */
export const workspaces: ReadonlyArray<Package> = [...packages, readPackage(join(ROOT, "test"), "test")!]

export const srcOf = (pkg: Package): string => join(pkg.dir, "src")
export const within = (path: string, dir: string): boolean => path === dir || path.startsWith(dir + sep)
export const ownerOf = (path: string): Package | undefined => workspaces.find((p) => within(path, p.dir))
export const rel = (path: string): string => relative(ROOT, path).split(sep).join("/")

/** The file a relative specifier names (`.ts` written out, or `.js` standing for it, or a directory's index). */
export const resolveRelative = (from: string, spec: string): string | undefined => {
  const base = resolve(dirname(from), spec)
  const candidates = [base, base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")]
  return candidates.find((c) => {
    try {
      return statSync(c).isFile()
    } catch {
      return false
    }
  })
}

/**
 * The cycles of a directed graph: for each strongly connected component with
 * more than one node (or a node importing itself), one cycle through it, as
 * the path `[a, b, ..., a]` starting at the component's smallest node.
 */
export const cyclesOf = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  // Tarjan's strongly connected components.
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const components: Array<Array<string>> = []
  let next = 0
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      components.push(component)
    }
  }
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v)

  const cycles: Array<Array<string>> = []
  for (const component of components) {
    const members = new Set(component)
    const start = [...component].sort()[0]!
    if (component.length === 1 && !(graph.get(start) ?? []).includes(start)) continue
    // Shortest way back to `start` inside the component (breadth first).
    const parent = new Map<string, string>()
    const queue = [start]
    let last: string | undefined
    while (queue.length > 0 && last === undefined) {
      const v = queue.shift()!
      for (const w of graph.get(v) ?? []) {
        if (w === start) {
          last = v
          break
        }
        if (members.has(w) && !parent.has(w)) {
          parent.set(w, v)
          queue.push(w)
        }
      }
    }
    const path = [start]
    for (let v = last!; v !== start; v = parent.get(v)!) path.splice(1, 0, v)
    cycles.push([...path, start])
  }
  return cycles
}

/** The import graph of one package's `src`: module → the modules of the same package it imports (its own name counts as its index). */
export const moduleGraph = (pkg: Package): Map<string, Array<string>> => {
  const src = srcOf(pkg)
  const graph = new Map<string, Array<string>>()
  for (const file of sourcesUnder(src)) {
    const targets = new Set<string>()
    for (const { spec } of importsOf(file)) {
      const target = spec === pkg.name ? join(src, "index.ts") : spec.startsWith(".") ? resolveRelative(file, spec) : undefined
      if (target !== undefined && within(target, src)) targets.add(rel(target))
    }
    graph.set(rel(file), [...targets].sort())
  }
  return graph
}

/** Package → the packages its `src` imports (runtime and type dependencies, not test ones). */
export const packageGraph = (): Map<string, Array<string>> => {
  const names = new Set(packages.map((p) => p.name))
  const graph = new Map<string, Array<string>>()
  for (const pkg of packages) {
    const deps = new Set<string>()
    for (const file of sourcesUnder(srcOf(pkg))) {
      for (const { spec } of importsOf(file)) {
        const name = spec.split("/").slice(0, 2).join("/")
        if (names.has(name) && name !== pkg.name) deps.add(name)
      }
    }
    graph.set(pkg.name, [...deps].sort())
  }
  return graph
}

/**
 * Every TypeScript file of the repository whose imports the rules apply to:
 * the whole tree (packages' src, test and scripts, bench/, deploy/, test/,
 * root files), so that a new folder with code is checked without a list to update.
 */
export const scannedFiles = (): Array<string> => sourcesUnder(ROOT)

/** The files reachable from `entry` by relative imports, with the bare packages each imports. */
export const reachable = (entry: string): Map<string, ReadonlyArray<Import>> => {
  const seen = new Map<string, ReadonlyArray<Import>>()
  const queue = [entry]
  while (queue.length > 0) {
    const file = queue.pop()!
    if (seen.has(file)) continue
    const imports = importsOf(file)
    seen.set(file, imports)
    for (const { spec } of imports) {
      const target = spec.startsWith(".") ? resolveRelative(file, spec) : undefined
      if (target !== undefined && isSource(target)) queue.push(target)
    }
  }
  return seen
}

export const formatCycle = (cycle: ReadonlyArray<string>): string => cycle.join(" → ")

/** The layer of everything that is not a package's `src`: nothing imports it. */
export const TOP = 4

/**
 * The layer of a package's `src`, lowest first: the wire contract 0, the
 * other libs 1, the services 2, the worker that runs them all 3. Within a
 * layer the order is the declared dependency graph (checked acyclic).
 */
export const packageLayer = (pkg: Package): number =>
  pkg.name === "@ctxd/contracts" ? 0 : pkg.group === "libs" ? 1 : pkg.name === "@ctxd/worker" ? 3 : pkg.group === "services" ? 2 : TOP

/** What a file belongs to: its package's directory, else its top-level folder (`bench`, `deploy`), else the root. */
export const unitOf = (path: string): string => {
  const owner = ownerOf(path)
  if (owner !== undefined) return owner.dir
  const parts = rel(path).split("/")
  return parts.length === 1 ? ROOT : join(ROOT, parts[0]!)
}

/** A file's layer: its package's inside a package's `src`; TOP for tests, scripts, bench/, deploy/, test/ and root files. */
export const layerOf = (path: string): number => {
  const owner = ownerOf(path)
  return owner !== undefined && within(path, srcOf(owner)) ? packageLayer(owner) : TOP
}

/** A package's `scripts/` and `bin/` hold programs run by node, which nothing imports. */
const isProgram = (path: string): boolean => {
  const owner = ownerOf(path)
  return owner !== undefined && (within(path, join(owner.dir, "scripts")) || within(path, join(owner.dir, "bin")))
}

export type Rule = "index" | "reach" | "layer" | "top" | "declared"

export interface Violation {
  readonly rule: Rule
  readonly message: string
}

const describeLayer = (layer: number): string => (layer === TOP ? "top" : `layer ${layer}`)
const nameOfUnit = (dir: string): string => (dir === ROOT ? "the root" : rel(dir))

/**
 * What is wrong with the imports of the file at `path` (absolute; the file
 * need not exist):
 * - index: a workspace package is imported by its bare name, or by a subpath
 *   its `exports` names (a second, lighter face), never another module;
 * - reach: a relative import stays inside its own package or top-level folder;
 * - layer: nothing imports from a higher layer (see {@link packageLayer});
 * - top: nothing imports the integration tests or a package's scripts/ or bin/
 *   (bench/ and deploy/ are out of reach already: they are no package);
 * - declared: a package imports only the workspace packages its package.json
 *   declares (`dependencies` from `src`, devDependencies too elsewhere).
 */
export const importViolations = (path: string, imports: ReadonlyArray<Import>): Array<Violation> => {
  const found: Array<Violation> = []
  const owner = ownerOf(path)
  const layer = layerOf(path)
  const unit = unitOf(path)
  const add = (rule: Rule, line: number, message: string) => found.push({ rule, message: `${rel(path)}:${line} ${message}` })
  for (const { spec, line } of imports) {
    if (spec.startsWith(".")) {
      const target = resolve(dirname(path), spec)
      if (unitOf(target) !== unit) {
        add(
          "reach",
          line,
          `imports "${spec}" (${rel(target)}), outside ${nameOfUnit(unit)}; import a package by its name, and nothing from bench/, deploy/ or test/`,
        )
      } else if (isProgram(target)) {
        add("top", line, `imports "${spec}", a program under scripts/ or bin/; move what it shares into the package's src or a lib`)
      } else if (layerOf(target) > layer) {
        add("layer", line, `imports "${spec}" (${describeLayer(layerOf(target))}) from ${describeLayer(layer)}`)
      }
      continue
    }
    const match = /^(@ctxd\/[^/]+)(\/.*)?$/.exec(spec)
    if (match === null) continue
    const name = match[1]!
    const target = workspaces.find((p) => p.name === name)
    if (match[2] !== undefined && target?.faces.has(match[2]) !== true)
      add("index", line, `imports "${spec}"; import from "${name}" (its index) instead`)
    if (target === undefined) {
      add("declared", line, `imports "${spec}": no workspace package is named ${name}`)
      continue
    }
    if (target === owner) continue
    if (target.group === "test") add("top", line, `imports ${name}: nothing imports the integration tests`)
    else if (packageLayer(target) > layer)
      add("layer", line, `imports ${name} (${describeLayer(packageLayer(target))}) from ${describeLayer(layer)}`)
    if (owner !== undefined) {
      const fromSrc = within(path, srcOf(owner))
      if (!(fromSrc ? owner.dependencies : owner.allDependencies).has(name)) {
        add(
          "declared",
          line,
          `imports ${name}, not among ${rel(owner.dir)}/package.json's ${fromSrc ? "dependencies" : "dependencies or devDependencies"}`,
        )
      }
    }
  }
  return found
}

/** Package → the workspace packages its package.json `dependencies` declare. */
export const declaredGraph = (): Map<string, Array<string>> => {
  const names = new Set(packages.map((p) => p.name))
  return new Map(packages.map((p) => [p.name, [...p.dependencies].filter((d) => names.has(d)).sort()]))
}
