import { defineConfig } from "vitest/config"

/**
 * One vitest run over every workspace: each package is a project named after
 * its package.json, so `vitest run --project @ctxd/context` runs one of them.
 * Tests that need a server (NATS, Postgres, containers, worker processes)
 * are the `test/` workspace (`@ctxd/integration`) and the package tests named
 * `*.integration.test.ts`; every other test runs with no server
 * (`npm run test:unit`; see CONTRIBUTING.md). `bench` holds the unit tests of
 * the benches' pure parts (the economics strategies and gap model).
 */
export default defineConfig({
  test: {
    projects: ["libs/*", "services/*", "test", "bench", "deploy"],
  },
})
