// The module structure rules, checked on every TypeScript file of the
// repository (packages' src, test and scripts, bench/, deploy/, test/):
// (a) no import cycle among the modules of one package, and none between
//     packages;
// (b) layers, lowest first: libs/contracts; the other libs; the services;
//     the worker; then everything that is no package's src (tests, scripts,
//     bench/, deploy/, test/). Nothing imports from a higher layer, and
//     nothing imports the top (bench/, deploy/, test/, a package's scripts/
//     or bin/). Within libs and within services the order is the package
//     dependency graph, which is exactly what each package.json declares;
// (c) a package is imported by its bare name (`@ctxd/db`) or by a subpath its
//     package.json `exports` names (`@ctxd/config/ConfigReference`, a face
//     that spares its users the yaml parser), never by another subpath
//     (`@ctxd/db/Database`), and a relative import never leaves its package
//     or top-level folder: everything outside code uses goes through the
//     package's index;
// (d) every workspace package a package imports is declared in its
//     package.json (`dependencies` for src, devDependencies too elsewhere);
// (e) `npm run bench` runs outside vitest: nothing it reaches imports vitest.
// Each rule also runs on planted bad imports, so that it cannot pass by
// checking nothing.
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import {
  cyclesOf,
  declaredGraph,
  formatCycle,
  importsIn,
  importsOf,
  importViolations,
  layerOf,
  moduleGraph,
  packageGraph,
  packageLayer,
  packages,
  reachable,
  rel,
  ROOT,
  type Rule,
  scannedFiles,
  TOP,
} from "./Structure.ts"

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
    expect(cyclesOf(graph).map(formatCycle).sort()).toEqual(["Detector.ts → LoopState.ts → Nudge.ts → Detector.ts", "Self.ts → Self.ts"])
    expect(
      cyclesOf(
        new Map([
          ["A", ["B"]],
          ["B", []],
        ]),
      ),
    ).toEqual([])
  })
})

/** The rules `path` (relative to the root) breaks with the imports in `text`. */
const broken = (path: string, text: string): Array<Rule> => importViolations(join(ROOT, path), importsIn(text)).map((v) => v.rule)

describe("the import rules on planted imports", () => {
  it("accept what the layers allow", () => {
    expect(
      broken("libs/db/src/X.ts", `import { Schema } from "@ctxd/contracts"\nimport * as Y from "./Y.ts"\nimport { Effect } from "effect"`),
    ).toEqual([])
    expect(
      broken("services/assembler/src/X.ts", `import { Database } from "@ctxd/db"\nimport { TokenCounter } from "@ctxd/token-counter"`),
    ).toEqual([])
    expect(
      broken(
        "services/token-counter/test/X.test.ts",
        `import { FakeProvider } from "@ctxd/testing"\nimport * as T from "../src/TokenCounter.ts"`,
      ),
    ).toEqual([])
    expect(
      broken(
        "bench/X.ts",
        `import { LocalTurns } from "@ctxd/assembler"\nimport { ConfigCheck } from "@ctxd/worker"\nimport type { Row } from "./Stats.ts"`,
      ),
    ).toEqual([])
    expect(
      broken("deploy/test/x.test.ts", `import { ConfigCheck } from "@ctxd/worker"\nimport * as K from "./KubernetesSchemas.ts"`),
    ).toEqual([])
    expect(broken("test/x.test.ts", `import { ContextClient } from "@ctxd/client"\nimport * as Harness from "./Harness.ts"`)).toEqual([])
  })

  it("index: a subpath of a package, from anywhere", () => {
    expect(broken("libs/db/src/X.ts", `import * as S from "@ctxd/contracts/Schemas"`)).toEqual(["index"])
    expect(broken("bench/X.ts", `import * as L from "@ctxd/assembler/LocalTurns"`)).toEqual(["index"])
    expect(broken("libs/db/src/X.ts", `import * as F from "@ctxd/config/ConfigFile"`)).toEqual(["index"])
  })

  it("index: a subpath the package exports is a face, not a reach inside", () => {
    expect(broken("libs/db/src/X.ts", `import { ConfigReference } from "@ctxd/config/ConfigReference"`)).toEqual([])
  })

  it("reach: a relative import out of its package or folder", () => {
    expect(broken("deploy/test/k8s.test.ts", `import * as C from "../../services/worker/src/ConfigCheck.ts"`)).toEqual(["reach"])
    expect(broken("services/token-counter/scripts/bench.ts", `import type { Row } from "../../../bench/Stats.ts"`)).toEqual(["reach"])
    expect(broken("bench/X.ts", `import * as R from "../services/token-counter/test/Replay.ts"`)).toEqual(["reach"])
    expect(broken("services/compactor/test/X.test.ts", `import * as R from "../../token-counter/test/Replay.ts"`)).toEqual(["reach"])
    expect(broken("test/x.test.ts", `import * as W from "../bench/Workspace.ts"`)).toEqual(["reach"])
  })

  it("layer: an import from a higher layer", () => {
    expect(broken("libs/contracts/src/X.ts", `import { Database } from "@ctxd/db"`)).toContain("layer")
    expect(broken("libs/db/src/X.ts", `import { Assembler } from "@ctxd/assembler"`)).toContain("layer")
    expect(broken("services/assembler/src/X.ts", `import { ConfigCheck } from "@ctxd/worker"`)).toContain("layer")
    expect(broken("services/loop-detector/src/X.ts", `import * as B from "../test/Helper.ts"`)).toEqual(["layer"])
    expect(broken("libs/testing/src/X.ts", `import * as S from "../scripts/fake-provider.ts"`)).toEqual(["top"])
  })

  it("top: nothing imports the integration tests or a package's programs", () => {
    expect(broken("bench/X.ts", `import * as H from "@ctxd/integration"`)).toEqual(["top"])
    expect(broken("services/worker/test/X.test.ts", `import * as D from "../scripts/demo.ts"`)).toEqual(["top"])
    expect(broken("services/worker/test/X.test.ts", `import * as M from "../bin/ctxd.ts"`)).toEqual(["top"])
  })

  it("declared: a workspace package the importer's package.json does not list", () => {
    // the summarizer declares @ctxd/testing as a devDependency only: its tests may import it, its src not
    expect(broken("services/summarizer/src/X.ts", `import { FakeProvider } from "@ctxd/testing"`)).toEqual(["declared"])
    expect(broken("services/summarizer/test/X.test.ts", `import { FakeProvider } from "@ctxd/testing"`)).toEqual([])
    expect(broken("libs/tokens/src/X.ts", `import { Database } from "@ctxd/db"`)).toEqual(["declared"])
    expect(broken("libs/db/src/X.ts", `import * as N from "@ctxd/nope"`)).toEqual(["declared"])
  })
})

/** Every violation of `rule` in the repository's sources. */
const violations = (rule: Rule): Array<string> =>
  scannedFiles().flatMap((file) =>
    importViolations(file, importsOf(file))
      .filter((v) => v.rule === rule)
      .map((v) => v.message),
  )

describe("module structure", () => {
  it("scans every package and every folder with code", () => {
    // Guards against a walker that silently finds nothing (and so passes).
    expect(packages.map((p) => p.name)).toEqual(expect.arrayContaining(["@ctxd/contracts", "@ctxd/context", "@ctxd/worker"]))
    expect(packages.length).toBeGreaterThanOrEqual(14)
    const files = scannedFiles().map(rel)
    expect(files.length).toBeGreaterThan(300)
    for (const folder of [
      "bench/",
      "bench/economics/",
      "deploy/test/",
      "deploy/ci/",
      "test/",
      "libs/contracts/src/",
      "libs/testing/scripts/",
      "services/worker/scripts/",
      "services/worker/bin/",
    ]) {
      expect(
        files.some((f) => f.startsWith(folder) && !f.slice(folder.length).includes("/")),
        folder,
      ).toBe(true)
    }
  })

  it("has no import cycle among the modules of any package", () => {
    const found = packages.flatMap((pkg) => cyclesOf(moduleGraph(pkg)).map((c) => `${pkg.name}: ${formatCycle(c)}`))
    expect(found, `import cycles:\n${found.join("\n")}`).toEqual([])
  })

  it("has no dependency cycle between packages", () => {
    const found = cyclesOf(packageGraph()).map(formatCycle)
    expect(found, `package cycles:\n${found.join("\n")}`).toEqual([])
  })

  it("layers the packages as their package.json files declare: each depends only on its layer or below, without a cycle", () => {
    const declared = declaredGraph()
    const layers = new Map(packages.map((p) => [p.name, packageLayer(p)]))
    expect(layers.get("@ctxd/contracts")).toBe(0)
    expect(layers.get("@ctxd/worker")).toBe(3)
    expect([...layers.values()].every((l) => l < TOP)).toBe(true)
    const upward = [...declared].flatMap(([name, deps]) =>
      deps
        .filter((d) => layers.get(d)! > layers.get(name)!)
        .map((d) => `${name} (layer ${layers.get(name)}) declares ${d} (layer ${layers.get(d)})`),
    )
    expect(upward, upward.join("\n")).toEqual([])
    expect(cyclesOf(declared).map(formatCycle)).toEqual([])
  })

  it("declares exactly the packages each package's src imports", () => {
    const declared = declaredGraph()
    const imported = packageGraph()
    const unused = packages.flatMap((p) =>
      declared
        .get(p.name)!
        .filter((d) => !imported.get(p.name)!.includes(d))
        .map((d) => `${p.name} declares ${d}, which its src never imports (a devDependency if only its tests do)`),
    )
    expect(unused, unused.join("\n")).toEqual([])
    expect(violations("declared")).toEqual([])
  })

  it("imports nothing from a higher layer", () => {
    expect(scannedFiles().filter((f) => layerOf(f) === 0).length).toBeGreaterThan(5)
    const found = violations("layer")
    expect(found, found.join("\n")).toEqual([])
  })

  it("imports nothing from the top: the integration tests, bench/, deploy/, a package's scripts/ or bin/", () => {
    const found = [...violations("top"), ...violations("reach")]
    expect(found, found.join("\n")).toEqual([])
  })

  it("imports a package only by its bare name, never a module inside it", () => {
    const found = violations("index")
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
