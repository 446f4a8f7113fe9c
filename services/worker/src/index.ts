/**
 * What other packages and the deployment checks use of the worker: the
 * offline configuration check. The worker runs as a process
 * (`src/main.ts`, the `ctxd` bin); its modules are not a library, so this
 * index exports only what is imported from outside.
 */
export * as ConfigCheck from "./ConfigCheck.ts"
