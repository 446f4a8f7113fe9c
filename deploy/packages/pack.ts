// Builds the published packages (docs/packages.md) and packs them:
//
//   npm run build            # stage them in dist/packages/<dir>: bundle, declarations, manifest, assets
//   npm run pack             # the same, then `npm pack` each into dist/packages/*.tgz
//   node deploy/packages/pack.ts [--out <dir>] [--staging <dir>] [--only ctxd,@ctxd/client] [--no-pack]
//
// Prints each package's files and its tarball's size; writes <out>/tarballs.json
// (package name → tarball path) for the scripts and tests that install them.
// The declarations take most of the time (a TypeScript program per package):
// without --only, two processes build half of the packages each.
import { spawn } from "node:child_process"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { packages, STAGING } from "./Packages.ts"
import { pack, stage } from "./Staging.ts"

const { values } = parseArgs({
  options: {
    "no-pack": { type: "boolean" },
    out: { type: "string" },
    staging: { type: "string" },
    only: { type: "string" },
    list: { type: "string" },
  },
})
const staging = resolve(values.staging ?? STAGING)
const out = resolve(values.out ?? STAGING)
const list = resolve(values.list ?? join(out, "tarballs.json"))
const started = performance.now()
const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KiB`
const seconds = (since: number): string => `${((performance.now() - since) / 1000).toFixed(1)} s`

/** Builds (and packs) `names` in a child process; its tarballs. */
const child = (names: ReadonlyArray<string>, index: number): Promise<Record<string, string>> =>
  new Promise((done, fail) => {
    const part = `${list}.${index}`
    const args = [import.meta.filename, "--out", out, "--staging", staging, "--only", names.join(","), "--list", part]
    const p = spawn(process.execPath, values["no-pack"] === true ? [...args, "--no-pack"] : args, { stdio: "inherit" })
    p.on("error", fail)
    p.on("exit", (code) => {
      if (code !== 0) return fail(new Error(`building ${names.join(", ")} failed (exit ${code})`))
      const got = values["no-pack"] === true ? {} : (JSON.parse(readFileSync(part, "utf8")) as Record<string, string>)
      rmSync(part, { force: true })
      done(got)
    })
  })

let tarballs: Record<string, string> = {}
if (values.only === undefined) {
  // the slowest declarations (the wire contract's) on their own, the rest beside them
  const [first, ...rest] = packages.map((p) => p.name)
  tarballs = Object.assign({}, ...(await Promise.all([child([first!], 0), child(rest, 1)]))) as Record<string, string>
} else {
  const only = values.only.split(",")
  for (const pkg of packages.filter((p) => only.includes(p.name))) {
    const t0 = performance.now()
    const staged = await stage(pkg, staging)
    const code = [...staged.bundled.files.values()].reduce((a, b) => a + b, 0)
    let line = `${pkg.name}: ${staged.bundled.files.size} files in dist/ (${kib(code)}), built in ${seconds(t0)}`
    if (values["no-pack"] !== true) {
      const tarball = pack(staged, out)
      tarballs[pkg.name] = tarball.file
      line += `; ${tarball.file} ${kib(tarball.bytes)}`
    }
    console.log(line)
  }
}
if (values["no-pack"] !== true) writeFileSync(list, `${JSON.stringify(tarballs, null, 2)}\n`)
if (values.only === undefined) console.log(`done in ${seconds(started)}`)
