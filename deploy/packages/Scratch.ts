/**
 * The published packages as a user gets them, for the tests: built and
 * packed (or taken from `CTXD_PACKAGES_DIR`, a folder `npm run pack` wrote,
 * with its tarballs.json), then `npm install`ed from the tarballs into a
 * scratch project outside the repository, their third-party dependencies
 * coming from the npm cache or the registry.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { delimiter, dirname, join } from "node:path"
import { ROOT } from "./Packages.ts"

export interface Ran {
  readonly code: number | string
  readonly stdout: string
  readonly stderr: string
}

/** Runs `command` to its end (at most `timeoutMs`, then SIGKILL); rejects unless it exits 0 and `allowFailure` is unset. */
export const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly timeoutMs?: number; readonly allowFailure?: boolean },
): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? nodeEnv(), stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 300_000)
    child.on("error", reject)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      const ran = { code: code ?? signal ?? "unknown", stdout, stderr }
      if (ran.code === 0 || options.allowFailure === true) resolve(ran)
      else reject(new Error(`${command} ${args.join(" ")} exited with ${ran.code}:\n${stdout.slice(-4000)}\n${stderr.slice(-4000)}`))
    })
  })

/**
 * The environment of the processes a test starts: this one's, with the Node
 * running the test (the repository's Node 24) first on the PATH, so that
 * `npx` and the `ctxd` bin's `#!/usr/bin/env node` get it too.
 */
export const nodeEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`,
  ...extra,
})

/** Package name → tarball path. */
export type Tarballs = Readonly<Record<string, string>>

/** The tarballs of `CTXD_PACKAGES_DIR` when it has a tarballs.json, else freshly built and packed into `dir`. */
export const tarballs = async (dir: string): Promise<{ readonly tarballs: Tarballs; readonly built: boolean }> => {
  const given = process.env.CTXD_PACKAGES_DIR
  if (given !== undefined && given !== "" && existsSync(join(given, "tarballs.json"))) {
    return { tarballs: JSON.parse(readFileSync(join(given, "tarballs.json"), "utf8")) as Tarballs, built: false }
  }
  await run(process.execPath, [join(ROOT, "deploy/packages/pack.ts"), "--out", dir, "--staging", join(dir, "staging")], {
    cwd: ROOT,
    timeoutMs: 300_000,
  })
  return { tarballs: JSON.parse(readFileSync(join(dir, "tarballs.json"), "utf8")) as Tarballs, built: true }
}

/** A scratch project in `dir` (an ES module package) with the tarballs of `names` installed by `npm install`. */
export const project = async (dir: string, all: Tarballs, names: ReadonlyArray<string>): Promise<void> => {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "package.json"), `${JSON.stringify({ name: "ctxd-scratch", private: true, type: "module" }, null, 2)}\n`)
  const files = names.map((name) => {
    const file = all[name]
    if (file === undefined) throw new Error(`no tarball of ${name}`)
    return file
  })
  await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...files], {
    cwd: dir,
    timeoutMs: 400_000,
  })
}

/**
 * Removes `dir` (a scratch project: hundreds of MB of node_modules) in a
 * detached `rm -rf` that outlives the test: on a loaded machine that takes
 * longer than a test hook should wait.
 */
export const removeLater = (dir: string): void => {
  const rm = spawn("rm", ["-rf", dir], { detached: true, stdio: "ignore" })
  rm.on("error", () => undefined)
  rm.unref()
}
