/**
 * The log files a replay reads: paths given on the command line, directories
 * walked (files ending `.traj`, `.json`, `.jsonl`, sorted), each parsed by
 * `AgentLogs.parse`. tau-bench results take their tools from a
 * `tau-bench-tools.json` next to them (the key named in the file name, e.g.
 * `airline`, or the only key).
 */
import { AgentLogs } from "@ctxd/context"
import type { OpenAI } from "@ctxd/contracts"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { basename, dirname, extname, join } from "node:path"

const EXTENSIONS = new Set([".traj", ".json", ".jsonl"])

/** A path that does not exist. */
export class Missing extends Error {}

/** The files under `paths` (a file as given, a directory walked), in order, without duplicates. */
export const files = (paths: ReadonlyArray<string>): Array<string> => {
  const out: Array<string> = []
  const walk = (path: string, given: boolean): void => {
    if (!existsSync(path)) throw new Missing(`${path}: no such file or directory`)
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path).sort()) walk(join(path, entry), false)
    } else if (given || EXTENSIONS.has(extname(path))) out.push(path)
  }
  for (const path of paths) walk(path, true)
  return [...new Set(out)]
}

const tauTools = (file: string): ReadonlyArray<OpenAI.Tool> => {
  const path = join(dirname(file), "tau-bench-tools.json")
  if (!existsSync(path)) return []
  const catalog = JSON.parse(readFileSync(path, "utf8")) as Record<string, ReadonlyArray<OpenAI.Tool>>
  const keys = Object.keys(catalog)
  const key = keys.find((k) => basename(file).includes(k)) ?? (keys.length === 1 ? keys[0] : undefined)
  return key === undefined ? [] : (catalog[key] ?? [])
}

/** One file read: its sessions, or why it was skipped. */
export type Read = { readonly file: string } & AgentLogs.Parsed

/** Reads and parses `file`. */
export const read = (file: string): Read => {
  const text = readFileSync(file, "utf8")
  const name = basename(file, extname(file))
  const parsed = AgentLogs.parse(name, text, {
    jsonl: extname(file) === ".jsonl",
    ...(text.includes('"traj"') ? { tauTools: tauTools(file) } : {}),
  })
  return { file, ...parsed }
}
