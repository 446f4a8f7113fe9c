/**
 * `npm run docs:config`: writes `docs/configuration.md`, the configuration
 * reference generated from the code (`src/ConfigReferencePage.ts`).
 */
import { ContextClient } from "@ctxd/client"
import { writeFileSync } from "node:fs"
import { pagePath, render, repositoryRoot } from "../src/ConfigReferencePage.ts"
import * as ConfigSources from "../src/ConfigSources.ts"

writeFileSync(
  `${repositoryRoot}${pagePath}`,
  await render([...ConfigSources.sources, { component: "client (libs/client)", configs: [ContextClient.config] }]),
)
console.log(`wrote ${pagePath}`)
