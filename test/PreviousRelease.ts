/**
 * The worker of the previous migration level, for rolling-upgrade tests: the
 * newest commit (on the first-parent line) whose migrations (`libs/db/migrations`,
 * or before those files `libs/db/src/Migrations.ts`) are fewer than this
 * checkout's, i.e. the release just before
 * the newest migration, extracted with `git archive` into a temporary directory
 * that reuses this checkout's `node_modules` by symlinks (an `npm ci` there
 * would take minutes), except the workspace packages (`@ctxd/*`), which point
 * into the extracted tree so the old worker runs the old code throughout.
 */
import { Migrations } from "@ctxd/db"
import { WorkerProcess } from "@ctxd/testing"
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

export interface PreviousRelease {
  readonly commit: string
  /** Its highest migration version. */
  readonly level: number
  /** The extracted checkout: pass it as a worker's `root`. */
  readonly root: string
  readonly remove: () => void
}

const git = (...args: ReadonlyArray<string>) =>
  execFileSync("git", ["-C", WorkerProcess.repoRoot, ...args], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })

/** Where a release keeps its migrations: `.sql` files, or (releases before them) a list in Migrations.ts. */
const PATHS = ["libs/db/migrations", "libs/db/src/Migrations.ts"] as const

/** The highest migration version of `commit`: its newest `NNNN_*.sql` file, else the versions listed in Migrations.ts. */
const levelOf = (commit: string): number => {
  const files = git("ls-tree", "--name-only", commit, `${PATHS[0]}/`).split("\n")
  const fromFiles = files.flatMap((path) => /\/(\d{4})_[^/]*\.sql$/.exec(path)?.slice(1) ?? []).map(Number)
  if (fromFiles.length > 0) return Math.max(...fromFiles)
  const source = git("show", `${commit}:${PATHS[1]}`)
  return Math.max(0, ...[...source.matchAll(/^\s+version: (\d+),$/gm)].map((m) => Number(m[1])))
}

/**
 * The previous migration level's checkout, or why it cannot be had (no git, a
 * shallow clone, no such commit); with `below`, the newest release whose
 * migrations stop below that version instead.
 */
export const extract = (below?: number): PreviousRelease | { readonly skip: string } => {
  const current = below ?? Math.max(...Migrations.migrations.map((m) => m.version))
  let commits: ReadonlyArray<string>
  try {
    if (git("rev-parse", "--is-shallow-repository").trim() === "true") return { skip: "shallow clone: no earlier release to run" }
    commits = git("log", "--first-parent", "--format=%H", "-n", "200", "HEAD", "--", ...PATHS)
      .split("\n")
      .filter(Boolean)
  } catch (error) {
    return { skip: `no git history here (${String(error).split("\n")[0]})` }
  }
  for (const [i, touched] of commits.entries()) {
    if (levelOf(touched) >= current) continue
    // the newest commit of that level: the parent of the one that moved past it (HEAD when the
    // working tree is what moved past it)
    const commit = i === 0 ? git("rev-parse", "HEAD").trim() : git("rev-parse", `${commits[i - 1]}^`).trim()
    const level = levelOf(commit)
    if (level >= current) return { skip: `cannot tell the previous migration level's commit (${commit.slice(0, 12)})` }
    const root = mkdtempSync(join(tmpdir(), `ctxd-release-${commit.slice(0, 8)}-`))
    execFileSync("sh", ["-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", WorkerProcess.repoRoot, commit, root])
    const modules = join(WorkerProcess.repoRoot, "node_modules")
    mkdirSync(join(root, "node_modules", "@ctxd"), { recursive: true })
    for (const entry of readdirSync(modules)) {
      if (entry !== "@ctxd") symlinkSync(join(modules, entry), join(root, "node_modules", entry))
    }
    for (const pkg of readdirSync(join(modules, "@ctxd"))) {
      // workspace links are relative (../../libs/db): resolve them inside the extracted tree
      const target = resolve(join(root, "node_modules", "@ctxd"), readlinkSync(join(modules, "@ctxd", pkg)))
      symlinkSync(target, join(root, "node_modules", "@ctxd", pkg))
    }
    return { commit, level, root, remove: () => rmSync(root, { recursive: true, force: true }) }
  }
  return { skip: `no commit with fewer than ${current} migrations in the last 200 that changed the migrations` }
}
