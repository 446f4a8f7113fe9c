import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@ctxd/testcontainers",
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    // pulling or starting NATS, Postgres and the workers
    hookTimeout: 240_000,
  },
})
