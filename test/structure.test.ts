// The module structure rules (issue 10, item 4), checked on the sources:
// (a) no import cycle among the modules of one package, and none between
//     packages;
// (b) a package is imported by its bare name (`@ctxd/db`), never by a subpath
//     (`@ctxd/db/Database`): everything outside code uses goes through the
//     package's index;
// (c) no relative import reaches into another package's `src`;
// (d) `npm run bench` runs outside vitest: nothing it reaches imports vitest.
// Imports are read from TypeScript's syntax tree (a parse, no type check):
// every `import` / `export ... from` (type-only ones too), `import("x")`
// calls and types, and `require("x")`; comments and strings that merely look
// like imports are not imports.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "..")

interface Import {
  readonly spec: string
  readonly line: number
}

interface Package {
  readonly name: string
  /** Absolute path of the package directory. */
  readonly dir: string
}

/** Every import specifier in `text`, in source order, with its 1-based line. */
const importsIn = (text: string): ReadonlyArray<Import> => {
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
const importsOf = (path: string): ReadonlyArray<Import> => {
  let imports = parsed.get(path)
  if (imports === undefined) parsed.set(path, (imports = importsIn(readFileSync(path, "utf8"))))
  return imports
}

const isSource = (name: string): boolean => /\.(?:c|m)?tsx?$/.test(name) && !name.endsWith(".d.ts")

/** TypeScript files under `dir`, recursively (no node_modules, no dot directories, no bench results). */
const sourcesUnder = (dir: string): Array<string> => {
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

const packages: ReadonlyArray<Package> = ["libs", "services"].flatMap((group) =>
  readdirSync(join(ROOT, group))
    .sort()
    .map((name) => join(ROOT, group, name))
    .filter((dir) => {
      try {
        return statSync(join(dir, "package.json")).isFile()
      } catch {
        return false
      }
    })
    .map((dir) => ({ dir, name: (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string }).name })),
)

const srcOf = (pkg: Package): string => join(pkg.dir, "src")
const within = (path: string, dir: string): boolean => path === dir || path.startsWith(dir + sep)
const ownerOf = (path: string): Package | undefined => packages.find((p) => within(path, p.dir))
const rel = (path: string): string => relative(ROOT, path).split(sep).join("/")

/** The file a relative specifier names (`.ts` written out, or `.js` standing for it, or a directory's index). */
const resolveRelative = (from: string, spec: string): string | undefined => {
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
const cyclesOf = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
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
const moduleGraph = (pkg: Package): Map<string, Array<string>> => {
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
const packageGraph = (): Map<string, Array<string>> => {
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

/** Every TypeScript file whose imports the sealing rules apply to. */
const scannedFiles = (): Array<string> => [
  ...packages.flatMap((p) => sourcesUnder(p.dir)),
  ...["test", "bench", "scripts"].flatMap((d) => sourcesUnder(join(ROOT, d))),
  ...readdirSync(ROOT)
    .filter(isSource)
    .map((name) => join(ROOT, name)),
]

/** The files reachable from `entry` by relative imports, with the bare packages each imports. */
const reachable = (entry: string): Map<string, ReadonlyArray<Import>> => {
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

const formatCycle = (cycle: ReadonlyArray<string>): string => cycle.join(" → ")

describe("import parsing and cycle finding", () => {
  it("reads type-only, multi-line, re-export, side-effect, dynamic and require imports, not comments or strings", () => {
    const text = [
      `import type * as A from "./A.ts"`,
      `// import { Z } from "./Z.ts"`,
      `/* export * from "./Y.ts" */`,
      `const s = 'import q from "./Q.ts"'`,
      `import {`,
      `  b,`,
      `  type C,`,
      `} from "@ctxd/x/Internal"`,
      `export type { T } from "./T.ts"`,
      `export * as N from "./N.ts"`,
      `import "./side.ts"`,
      `const m = await import("./Dyn.ts")`,
      `type R = import("./R.ts").R`,
      `const req = require("./Req.cjs")`,
    ].join("\n")
    expect(importsIn(text)).toEqual([
      { spec: "./A.ts", line: 1 },
      { spec: "@ctxd/x/Internal", line: 8 },
      { spec: "./T.ts", line: 9 },
      { spec: "./N.ts", line: 10 },
      { spec: "./side.ts", line: 11 },
      { spec: "./Dyn.ts", line: 12 },
      { spec: "./R.ts", line: 13 },
      { spec: "./Req.cjs", line: 14 },
    ])
  })

  it("finds a planted cycle and reports its path", () => {
    const graph = new Map<string, Array<string>>([
      ["Detector.ts", ["Config.ts", "LoopState.ts"]],
      ["LoopState.ts", ["Canonical.ts", "Nudge.ts"]],
      ["Nudge.ts", ["Config.ts", "Detector.ts"]],
      ["Config.ts", []],
      ["Canonical.ts", []],
      ["Self.ts", ["Self.ts"]],
    ])
    expect(cyclesOf(graph).map(formatCycle).sort()).toEqual([
      "Detector.ts → LoopState.ts → Nudge.ts → Detector.ts",
      "Self.ts → Self.ts",
    ])
    expect(cyclesOf(new Map([["A", ["B"]], ["B", []]]))).toEqual([])
  })
})

describe("module structure", () => {
  it("scans every package", () => {
    // Guards against a walker that silently finds nothing (and so passes).
    expect(packages.map((p) => p.name)).toEqual(expect.arrayContaining(["@ctxd/contracts", "@ctxd/context", "@ctxd/worker"]))
    expect(packages.length).toBeGreaterThanOrEqual(14)
    expect(scannedFiles().length).toBeGreaterThan(100)
  })

  it("has no import cycle among the modules of any package", () => {
    const found = packages.flatMap((pkg) => cyclesOf(moduleGraph(pkg)).map((c) => `${pkg.name}: ${formatCycle(c)}`))
    expect(found, `import cycles:\n${found.join("\n")}`).toEqual([])
  })

  it("has no dependency cycle between packages", () => {
    const found = cyclesOf(packageGraph()).map(formatCycle)
    expect(found, `package cycles:\n${found.join("\n")}`).toEqual([])
  })

  it("imports a package only by its bare name, never a module inside it", () => {
    const found: Array<string> = []
    for (const file of scannedFiles()) {
      for (const { spec, line } of importsOf(file)) {
        const match = /^(@ctxd\/[^/]+)\/./.exec(spec)
        if (match !== null) found.push(`${rel(file)}:${line} imports "${spec}"; import from "${match[1]}" (its index) instead`)
      }
    }
    expect(found, found.join("\n")).toEqual([])
  })

  it("has no relative import into another package's src", () => {
    const found: Array<string> = []
    for (const file of scannedFiles()) {
      const owner = ownerOf(file)
      for (const { spec, line } of importsOf(file)) {
        if (!spec.startsWith(".")) continue
        const target = resolve(dirname(file), spec)
        const reached = packages.find((p) => within(target, srcOf(p)))
        if (reached !== undefined && reached !== owner) {
          found.push(`${rel(file)}:${line} imports "${spec}" (inside ${reached.name}'s src); import from "${reached.name}" instead`)
        }
      }
    }
    expect(found, found.join("\n")).toEqual([])
  })

  it("keeps vitest out of what `npm run bench` loads (it runs under plain node)", () => {
    const files = reachable(join(ROOT, "bench", "run.ts"))
    expect(files.size).toBeGreaterThan(10)
    const found: Array<string> = []
    for (const [file, imports] of files) {
      for (const { spec, line } of imports) {
        if (/^(@effect\/)?vitest$/.test(spec)) found.push(`${rel(file)}:${line} imports "${spec}"`)
      }
    }
    expect(found, found.join("\n")).toEqual([])
  })
})
