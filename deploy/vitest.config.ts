import { defineProject } from "vitest/config"

/** Checks of the deployment files: Kubernetes manifests against the API's schemas, the Grafana dashboard. */
export default defineProject({
  test: {
    name: "deploy",
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
  },
})
