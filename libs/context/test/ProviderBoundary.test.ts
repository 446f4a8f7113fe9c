// The provider boundary: everything specific to a provider format lives in
// its adapter (`libs/context/src/providers/<format>/`), so no other source
// file may branch on a format or provider name. A branch is a comparison
// (`===`, `!==`, `==`, `!=`) with one of the names as a string literal, or a
// `case` clause on one. Files are read from TypeScript's syntax tree (a
// parse, no type check), so names in comments, in types (`"anthropic" |
// "openai"`) or as plain values do not count. Test files are outside the
// rule; so is `libs/contracts`, which defines the wire literals.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, resolve, sep } from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "../../..")
const NAMES: ReadonlySet<string> = new Set(["anthropic", "openai", "openai-responses", "gemini", "google"])

/**
 * Files still allowed to branch on a name, each with why. An entry that no
 * longer branches fails the test too, so the list only shrinks.
 */
const ALLOWED: ReadonlyMap<string, string> = new Map([
  // fixtures, not the request path: rendering them through the adapters would add each renderer's cache markers and change their bytes
  ["libs/testing/src/Workloads.ts", "test workloads converted by hand from their recorded Chat Completions form into each wire format"],
  // issue 38 (open): the gateway speaks each provider's HTTP API; its per-API knowledge is to move into one module per API
  ["services/gateway/src/Body.ts", "the gateway's per-API body rules, to move into per-API modules (issue 38)"],
  ["services/gateway/src/GatewayConfig.ts", "the gateway's per-provider upstream keys, to move into per-API modules (issue 38)"],
  ["services/gateway/src/Routes.ts", "the gateway's per-API routes, to move into per-API modules (issue 38)"],
  ["services/gateway/src/UsageTap.ts", "the gateway's per-API stream usage events, to move into per-API modules (issue 38)"],
  ["services/gateway/src/TurnRequests.ts", "the gateway's per-API turn translation, to move into per-API modules (issue 38)"],
  ["libs/testing/src/internal/fakeProvider/models.ts", "the fake provider's model lists, one per API (issue 38)"],
  ["libs/testing/src/internal/fakeProvider/structured.ts", "the fake provider's structured answers, one per API (issue 38)"],
])

/** The source folders checked: every package's `src` and `scripts`. */
const roots = (): Array<string> =>
  ["libs", "services"].flatMap((group) =>
    readdirSync(join(ROOT, group)).flatMap((pkg) =>
      ["src", "scripts"]
        .map((d) => join(ROOT, group, pkg, d))
        .filter((d) => statSync(d, { throwIfNoEntry: false })?.isDirectory() === true),
    ),
  )

const walk = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name)
    if (e.isDirectory()) return e.name === "node_modules" ? [] : walk(path)
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts") ? [path] : []
  })

const posix = (path: string): string => relative(ROOT, path).split(sep).join("/")

const inScope = (file: string): boolean => !file.startsWith("libs/context/src/providers/") && !file.startsWith("libs/contracts/")

/** Each branch on a name in `text`: `line: source` of the comparison or `case`. */
const branchesIn = (text: string): Array<string> => {
  const file = ts.createSourceFile("module.ts", text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: Array<string> = []
  const named = (node: ts.Node): boolean => ts.isStringLiteralLike(node) && NAMES.has(node.text)
  const note = (node: ts.Node): void => {
    const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1
    found.push(`${line}: ${node.getText(file).slice(0, 100)}`)
  }
  const comparisons = new Set([
    ts.SyntaxKind.EqualsEqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsEqualsToken,
    ts.SyntaxKind.EqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsToken,
  ])
  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node) && comparisons.has(node.operatorToken.kind) && (named(node.left) || named(node.right))) note(node)
    else if (ts.isCaseClause(node) && named(node.expression)) note(node.expression)
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

describe("provider boundary", () => {
  const files = roots().flatMap(walk).map(posix).filter(inScope).sort()
  const branches = new Map(files.map((f) => [f, branchesIn(readFileSync(join(ROOT, f), "utf8"))] as const).filter(([, b]) => b.length > 0))

  it("finds the sources", () => {
    expect(files.length).toBeGreaterThan(100)
    expect(files).toContain("libs/context/src/internal/stages.ts")
  })

  it("no file outside the adapters branches on a format or provider name", () => {
    const offending = [...branches].filter(([f]) => !ALLOWED.has(f)).map(([f, b]) => `${f}\n  ${b.join("\n  ")}`)
    expect(offending, "branch through Providers.of(format) / the adapter instead").toEqual([])
  })

  it("every allowed file still branches (the list only shrinks)", () => {
    expect([...ALLOWED.keys()].filter((f) => !branches.has(f))).toEqual([])
  })

  it("sees a branch when there is one", () => {
    expect(branchesIn(`if (f === "gemini") x()\nswitch (f) { case "openai": break }\nconst t: "anthropic" | "openai" = "openai"`)).toEqual([
      `1: f === "gemini"`,
      `2: "openai"`,
    ])
  })
})
