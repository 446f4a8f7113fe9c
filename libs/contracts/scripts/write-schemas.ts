// Writes the wire contract's JSON Schema files to docs/schemas/.
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { render } from "../src/JsonSchemas.ts"

const dir = join(import.meta.dirname, "../../../docs/schemas")
mkdirSync(dir, { recursive: true })
for (const [file, text] of render()) {
  writeFileSync(join(dir, file), text)
  console.log(`wrote docs/schemas/${file}`)
}
