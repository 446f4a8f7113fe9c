import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@ctxd/integration",
    include: ["**/*.test.ts"],
    testTimeout: 30_000,
    // a beforeAll that starts a worker waits up to its ready limit (WorkerProcess.READY_TIMEOUT_MS)
    hookTimeout: 90_000,
  },
})
