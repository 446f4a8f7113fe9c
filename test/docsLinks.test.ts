// Every relative link in README.md and docs/*.md resolves: the file or
// directory exists, and a `#fragment` names a heading of the page it points
// to (GitHub's heading ids: lower case, punctuation dropped, spaces as
// hyphens, `-1`, `-2`, ... for repeats). Links to the web are not followed.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "..")

const pages = (): ReadonlyArray<string> => [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
]

/** The page's text outside fenced code blocks and inline code spans. */
const prose = (text: string): string =>
  text
    .split(/^```.*$/m)
    .filter((_, i) => i % 2 === 0)
    .join("\n")
    .replace(/`[^`\n]*`/g, "``")

/** The targets of `[text](target)` and `![alt](target)` links. */
const links = (text: string): ReadonlyArray<string> =>
  [...prose(text).matchAll(/\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!)

/** GitHub's id of a heading's text. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-")

/** The heading ids of a Markdown page, repeats numbered as GitHub numbers them. */
const anchors = (text: string): ReadonlySet<string> => {
  const seen = new Map<string, number>()
  const ids = new Set<string>()
  const outside = text
    .split(/^```.*$/m)
    .filter((_, i) => i % 2 === 0)
    .join("\n")
  for (const m of outside.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(m[1]!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    ids.add(n === 0 ? base : `${base}-${n}`)
  }
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) ids.add(m[1]!)
  return ids
}

/** Why `target`, linked from `page`, does not resolve (`undefined`: it does). */
const problem = (page: string, target: string): string | undefined => {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined // https:, mailto:
  const [path, fragment] = target.split("#", 2) as [string, string | undefined]
  const file = path === "" ? join(ROOT, page) : resolve(dirname(join(ROOT, page)), decodeURIComponent(path))
  const rel = relative(ROOT, file).split("\\").join("/")
  if (rel.startsWith("..")) return `${target}: leaves the repository`
  if (!existsSync(file)) return `${target}: no file ${rel}`
  if (fragment === undefined || fragment === "") return undefined
  if (statSync(file).isDirectory() || !file.endsWith(".md")) return `${target}: a fragment into ${rel}, which is no Markdown page`
  return anchors(readFileSync(file, "utf8")).has(fragment) ? undefined : `${target}: no heading #${fragment} in ${rel}`
}

describe("documentation links", () => {
  it("checks the README and every page of docs/", () => {
    expect(pages()).toContain("README.md")
    expect(pages()).toContain("docs/concepts.md")
  })

  it("finds links, and heading ids as GitHub makes them", () => {
    expect(links("see [a](b.md#c) and `[x](not-a-link)` and ![i](img.png)\n```\n[y](code)\n```\n")).toEqual(["b.md#c", "img.png"])
    expect([...anchors("# Bodies larger than `max_payload`\n## Provider compaction and ctxd's compaction\n## A\n## A\n")]).toEqual([
      "bodies-larger-than-max_payload",
      "provider-compaction-and-ctxds-compaction",
      "a",
      "a-1",
    ])
  })

  it("refuses a missing file and a missing heading", () => {
    expect(problem("README.md", "docs/nowhere.md")).toContain("no file docs/nowhere.md")
    expect(problem("README.md", "docs/concepts.md#no-such-heading")).toContain("no heading #no-such-heading")
  })

  for (const page of pages()) {
    it(`every relative link of ${page} resolves`, () => {
      const text = readFileSync(join(ROOT, page), "utf8")
      const broken = links(text)
        .map((target) => problem(page, target))
        .filter((p) => p !== undefined)
      expect(broken, `${page}: broken links`).toEqual([])
    })
  }
})
