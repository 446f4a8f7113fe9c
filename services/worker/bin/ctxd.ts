#!/usr/bin/env node
// The `ctxd` command (`npx ctxd help`); Node 24 runs this TypeScript as it is.
import { run } from "../src/cli/Main.ts"

process.exitCode = await run(process.argv.slice(2))
