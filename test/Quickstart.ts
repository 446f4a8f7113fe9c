/**
 * The README's quickstart: the shell commands between `<!-- quickstart -->`
 * and `<!-- /quickstart -->`, in the one fenced block there.
 */

/** The markers around the quickstart block. */
export const OPEN = "<!-- quickstart -->"
export const CLOSE = "<!-- /quickstart -->"

/** The commands of the quickstart block in `readme` (`file` names it in errors); throws, saying what is missing, when there is no block. */
export const commands = (readme: string, file = "README.md"): Array<string> => {
  const start = readme.indexOf(OPEN)
  const end = readme.indexOf(CLOSE, start + 1)
  if (start === -1 || end === -1)
    throw new Error(`${file} has no quickstart block: put the commands in a fenced sh block between ${OPEN} and ${CLOSE}`)
  const fenced = /```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(start + OPEN.length, end))
  if (fenced === null) throw new Error(`${file}: no fenced code block between ${OPEN} and ${CLOSE}`)
  return fenced[1]!
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
}

/**
 * Whether the `script` (package.json's `test:unit`) runs a subset of what
 * `everything` (its `test`, what CI runs) does: the same command with only
 * options that narrow it (`--project`, `--exclude`) after it.
 */
export const narrows = (script: string, everything: string): boolean => {
  if (!script.startsWith(`${everything} `)) return false
  const extra =
    script
      .slice(everything.length)
      .trim()
      .match(/'[^']*'|"[^"]*"|\S+/g) ?? []
  for (let i = 0; i < extra.length; i += 2) if (!["--project", "--exclude"].includes(extra[i]!) || extra[i + 1] === undefined) return false
  return extra.length > 0
}
