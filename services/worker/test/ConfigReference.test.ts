import { ContextClient } from "@ctxd/client"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { pagePath, render, repositoryRoot } from "../src/ConfigReferencePage.ts"
import * as ConfigSources from "../src/ConfigSources.ts"

// As `npm run docs:config` renders it: the worker's sources and the client library's.
const sources = [...ConfigSources.sources, { component: "client (libs/client)", configs: [ContextClient.config] }]

const files = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) return files(path)
    return path.endsWith(".ts") && !path.endsWith(".test.ts") ? [path] : []
  })

// The test tooling (libs/testing, libs/testcontainers) reads variables of its own; no ctxd process does.
const sourceDirs = ["libs", "services"].flatMap((top) =>
  readdirSync(join(repositoryRoot, top))
    .filter((name) => name !== "testing" && name !== "testcontainers")
    .map((name) => join(repositoryRoot, top, name, "src")),
)

const READ =
  /Config\.(?:string|integer|number|boolean|redacted|duration|url|port|nonEmptyString|secret)\(\s*"([A-Z][A-Z0-9_]*)"|Config\.literal\([^)]*\)\(\s*"([A-Z][A-Z0-9_]*)"|Config\.array\([^,]+,\s*"([A-Z][A-Z0-9_]*)"|process\.env(?:\.([A-Z][A-Z0-9_]*)|\[\s*"([A-Z][A-Z0-9_]*)"\s*\])|\b(?:int|integer|fraction|positive|text|optionalUrl|optionalKey|optionalString|optionalSecret|optional|share)\(\s*"([A-Z][A-Z0-9_]*)"/g

/** The text without comments (a doc comment may show a read as an example). */
const code = (text: string): string => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")

/** Every variable name the sources read through `Config` (or a local helper over it) or `process.env`. */
const namesRead = (): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const dir of sourceDirs) {
    let all: Array<string> = []
    try {
      all = files(dir)
    } catch {
      continue
    }
    for (const file of all) {
      for (const match of code(readFileSync(file, "utf8")).matchAll(READ)) {
        const name = match.slice(1).find((group) => group !== undefined)
        if (name !== undefined) names.add(name)
      }
    }
  }
  return names
}

describe("ConfigReference", () => {
  it(`${pagePath} is what npm run docs:config writes`, async () => {
    const page = readFileSync(join(repositoryRoot, pagePath), "utf8")
    expect(page === (await render(sources)), "stale: run npm run docs:config").toBe(true)
  })

  it("lists every variable the sources read, each with a meaning", () => {
    const rows = ConfigSources.rows(sources)
    const listed = new Set(rows.map((row) => row.name))
    const read = namesRead()
    expect(read.size).toBeGreaterThan(100)
    expect([...read].filter((name) => !listed.has(name))).toEqual([])
    expect(rows.filter((row) => row.description === "").map((row) => row.name)).toEqual([])
  })
})
