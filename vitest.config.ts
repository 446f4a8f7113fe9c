import { defineConfig } from "vitest/config"

/**
 * One vitest run over every workspace: each package is a project named after
 * its package.json, so `vitest run --project @ctxd/context` runs one of them.
 * Integration tests (real NATS and Postgres) live in `test/` and in the
 * packages that own a connection (db, nats). `bench` holds the unit tests of
 * the benches' pure parts (the economics strategies and gap model).
 */
export default defineConfig({
  test: {
    projects: ["libs/*", "services/*", "test", "bench", "deploy"],
  },
})
