import { defineProject } from "vitest/config"

/** Unit tests of the benches' pure parts (`npx vitest run bench/economics`). */
export default defineProject({
  test: {
    name: "bench",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
  },
})
