// `npm run config:check -- ctxd.yaml [more.yaml ...]`: validates configuration files offline.
// Exit code 0: all valid; 1: a file is not valid (each problem printed with its key path and line); 2: no file named.
import { Effect } from "effect"
import * as ConfigCheck from "../src/ConfigCheck.ts"

const files = process.argv.slice(2).filter((arg) => arg !== "--")
if (files.length === 0) {
  console.error("usage: npm run config:check -- <ctxd.yaml> [...]")
  process.exit(2)
}
let ok = true
for (const file of files) {
  const checked = await Effect.runPromise(ConfigCheck.check(file))
  for (const line of checked.lines) (checked.ok ? console.log : console.error)(line)
  ok &&= checked.ok
}
process.exit(ok ? 0 : 1)
