/**
 * The worker thread of `RuntimeConfig.loadOffThread`: loads the files named by
 * `workerData` and posts the outcome (plain data: the error class does not
 * cross threads).
 */
import { Effect, Either } from "effect"
import { parentPort, workerData } from "node:worker_threads"
import * as RuntimeConfig from "../RuntimeConfig.ts"

const result = await Effect.runPromise(Effect.either(RuntimeConfig.load(workerData as RuntimeConfig.Files)))
parentPort?.postMessage(
  Either.isRight(result)
    ? { ok: true, loaded: result.right }
    : { ok: false, file: result.left.file, issues: result.left.issues, message: result.left.message },
)
