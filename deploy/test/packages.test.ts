// The published packages' definitions and manifests, without building
// anything (packages.integration.test.ts builds, packs and installs them).
import { existsSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { manifestOf, packages, type Published, ROOT } from "../packages/Packages.ts"
import { type Bundled } from "../packages/Bundle.ts"
import { dependenciesOf, manifest } from "../packages/Staging.ts"

const bundled = (imports: ReadonlyArray<string>, typeImports: ReadonlyArray<string> = []): Bundled => ({
  imports: new Set(imports),
  typeImports: new Set(typeImports),
  files: new Map(),
})
const named = (name: string): Published => packages.find((p) => p.name === name)!

describe("the published packages", () => {
  it("are ctxd, @ctxd/client, @ctxd/contracts and @ctxd/testcontainers, built from files that exist", () => {
    expect(packages.map((p) => p.name).sort()).toEqual(["@ctxd/client", "@ctxd/contracts", "@ctxd/testcontainers", "ctxd"])
    for (const pkg of packages) {
      for (const file of Object.values(pkg.entries)) expect(existsSync(join(ROOT, pkg.workspace, file)), file).toBe(true)
      for (const asset of pkg.assets ?? []) expect(existsSync(join(ROOT, asset.from)), asset.from).toBe(true)
      for (const f of [...(pkg.threads ?? []), ...(pkg.first ?? [])]) expect(existsSync(join(ROOT, f.file)), f.file).toBe(true)
      expect(pkg.typed).toContain("index")
    }
  })

  it("declare a bundle's third-party imports at the ranges of the workspaces they come from, and no internal library", () => {
    const deps = dependenciesOf(named("@ctxd/client"), bundled(["effect", "@nats-io/obj"], ["@ctxd/contracts", "@nats-io/transport-node"]))
    expect(deps).toEqual({
      "@ctxd/contracts": manifestOf("libs/contracts").version,
      "@nats-io/obj": manifestOf("libs/nats").dependencies!["@nats-io/obj"],
      "@nats-io/transport-node": manifestOf("libs/client").dependencies!["@nats-io/transport-node"],
      effect: manifestOf("libs/client").dependencies!.effect,
    })
  })

  it("refuse a bundle that imports a package no package.json declares", () => {
    expect(() => dependenciesOf(named("@ctxd/client"), bundled(["left-pad"]))).toThrow(/left-pad/)
    // the wire contract declares effect only: pg is the database library's
    expect(() => dependenciesOf(named("@ctxd/contracts"), bundled(["pg"]))).toThrow(/pg/)
  })

  it("get a manifest ready to publish: MIT, Node 24, exports with types, files, the command's bin", () => {
    const ctxd = manifest(named("ctxd"), bundled(["effect", "pg"]))
    expect(ctxd).toMatchObject({
      name: "ctxd",
      version: manifestOf("services/worker").version,
      license: "MIT",
      type: "module",
      engines: { node: manifestOf(".").engines!.node },
      repository: { type: "git", directory: "services/worker" },
      bin: { ctxd: "dist/ctxd.js" },
      exports: { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" }, "./package.json": "./package.json" },
      files: ["dist", "migrations", "examples"],
      publishConfig: { access: "public" },
    })
    expect(Object.keys(ctxd.dependencies as object).filter((d) => d.startsWith("@ctxd/"))).toEqual([])
    expect(manifest(named("@ctxd/contracts"), bundled(["effect"])).exports).toMatchObject({ "./schemas/*": "./schemas/*" })
  })
})
