// `npm run config:check -- ctxd.yaml [more.yaml ...]`: validates configuration files offline.
// Exit code 0: all valid; 1: a file is not valid (each problem printed with its key path and line); 2: usage.
const USAGE = `usage: npm run config:check -- <ctxd.yaml> [more.yaml ...]

validates configuration files offline (the worker's own check; also \`ctxd config check <file>\`),
each problem with its key path and line.

options:
  -h, --help                this text

exit codes: 0 all valid, 1 a file is not valid, 2 usage`

const argv = process.argv.slice(2)
const end = argv.indexOf("--")
const options = end === -1 ? argv : argv.slice(0, end)
if (options.some((arg) => arg === "--help" || arg === "-h")) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
const unknown = options.find((arg) => arg.startsWith("-") && arg !== "-")
const files = argv.filter((arg) => arg !== "--")
if (unknown !== undefined || files.length === 0) {
  process.stderr.write(`config:check: ${unknown === undefined ? "name at least one file" : `unknown option ${unknown}`}\n\n${USAGE}\n`)
  process.exit(2)
}
const [{ Effect }, ConfigCheck] = await Promise.all([import("effect"), import("../src/ConfigCheck.ts")])
let ok = true
for (const file of files) {
  const checked = await Effect.runPromise(ConfigCheck.check(file))
  for (const line of checked.lines) (checked.ok ? console.log : console.error)(line)
  ok &&= checked.ok
}
process.exit(ok ? 0 : 1)
