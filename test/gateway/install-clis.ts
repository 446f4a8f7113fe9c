/**
 * Installs the agent CLIs the gateway tests run (the pinned versions of
 * `AgentClis.PACKAGES`) into `AgentClis.cliDir()` with npm, outside the
 * repo's lockfile: `node test/gateway/install-clis.ts` (about 30 s the first
 * time, nothing when they are there; recorded in that directory's own
 * package.json, never the repo's). Install scripts are not run (npm's
 * default here); the three CLIs work without them.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { binary, cliDir, CLIS, PACKAGES } from "./AgentClis.ts"

const dir = cliDir()
const installed = (): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const cli of CLIS) {
    const manifest = Path.join(dir, "node_modules", ...PACKAGES[cli].name.split("/"), "package.json")
    if (Fs.existsSync(manifest)) out[cli] = (JSON.parse(Fs.readFileSync(manifest, "utf8")) as { version: string }).version
  }
  return out
}

const have = installed()
const missing = CLIS.filter((cli) => have[cli] !== PACKAGES[cli].version || binary(cli) === undefined)
if (missing.length === 0) {
  console.log(`agent CLIs ready in ${dir}`)
} else {
  Fs.mkdirSync(dir, { recursive: true })
  const manifest = Path.join(dir, "package.json")
  if (!Fs.existsSync(manifest)) Fs.writeFileSync(manifest, JSON.stringify({ name: "ctxd-agent-clis", private: true }, null, 2))
  const specs = missing.map((cli) => `${PACKAGES[cli].name}@${PACKAGES[cli].version}`)
  console.log(`installing ${specs.join(" ")} into ${dir}`)
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--save-exact", "--prefix", dir, ...specs], { stdio: "inherit" })
  const after = CLIS.filter((cli) => binary(cli) === undefined)
  if (after.length > 0) throw new Error(`not installed: ${after.join(", ")}`)
}
