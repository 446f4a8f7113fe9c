/**
 * Reads a workspace scope's Markdown files from the filesystem for
 * `WorkspaceCache`: `<dir>/<file>` for each named file (`dir`: the scope's
 * directory, `<root>/<scope>` or `<root>/<tenant>/<scope>`), names
 * already validated (tokens plus `.md`: no separator, no `..`). A missing or
 * empty file, or one that is not a regular file, is skipped; one above the
 * size limit is refused before it is read whole.
 */
import { Errors } from "@ctxd/contracts"
import { Effect } from "effect"
import { constants } from "node:fs"
import { open, stat } from "node:fs/promises"
import { join } from "node:path"

/** One file of a bundle as read. */
export interface File {
  readonly name: string
  readonly text: string
  /** Its size in bytes (UTF-8, as stored). */
  readonly bytes: number
}

const codeOf = (e: unknown): string => (typeof e === "object" && e !== null && "code" in e ? String(e.code) : "unknown")

/** A failure to read that is not the request's fault: its errno code only (the path is the operator's, not secret, but kept short). */
const ioError = (scope: string, name: string, e: unknown) =>
  new Errors.InternalError({ message: `workspace ${scope}: ${name} could not be read (${codeOf(e)})` })

/** Reads `name` of `dir`, at most `maxBytes`; undefined when missing, empty or not a regular file. */
const readOne = (dir: string, scope: string, name: string, maxBytes: number) =>
  Effect.tryPromise({
    try: async (): Promise<File | Errors.PayloadTooLarge | undefined> => {
      let handle
      try {
        // O_NONBLOCK: a FIFO put there by mistake must not hang the turn (it is skipped below)
        handle = await open(join(dir, name), constants.O_RDONLY | constants.O_NONBLOCK)
      } catch (e) {
        if (codeOf(e) === "ENOENT" || codeOf(e) === "ENOTDIR") return undefined
        throw e
      }
      try {
        const info = await handle.stat()
        if (!info.isFile()) return undefined
        const tooLarge = (size: number) =>
          new Errors.PayloadTooLarge({
            message: `workspace ${scope}: ${name} is ${size} bytes, over the per-file limit of ${maxBytes} (CTXD_WORKSPACE_MAX_FILE_BYTES)`,
            limit: maxBytes,
            size,
          })
        if (info.size > maxBytes) return tooLarge(info.size)
        // read at most one byte past the limit: a file that grew since the stat is caught too
        const buffer = Buffer.alloc(Math.min(info.size, maxBytes) + 1)
        let length = 0
        for (;;) {
          const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length)
          if (bytesRead === 0) break
          length += bytesRead
          if (length === buffer.length) break
        }
        if (length > maxBytes) return tooLarge(length)
        const text = buffer.toString("utf8", 0, length)
        return text.trim() === "" ? undefined : { name, text, bytes: length }
      } finally {
        await handle.close()
      }
    },
    catch: (e) => ioError(scope, name, e),
  }).pipe(Effect.flatMap((r) => (r instanceof Errors.PayloadTooLarge ? Effect.fail(r) : Effect.succeed(r))))

/**
 * The files `names` of the scope's directory `dir`, in that order, those present and
 * not empty. A scope without a directory → `BadRequest`; a file over
 * `maxFileBytes` → `PayloadTooLarge` (`TooLarge`).
 */
export const read = (
  dir: string,
  scope: string,
  names: ReadonlyArray<string>,
  maxFileBytes: number,
): Effect.Effect<ReadonlyArray<File>, Errors.BadRequest | Errors.PayloadTooLarge | Errors.InternalError> => {
  const missing = new Errors.BadRequest({
    message: `no workspace ${scope}: the workspace root has no directory of that name`,
    path: "system.workspace",
  })
  return Effect.gen(function* () {
    const isDir = yield* Effect.tryPromise({
      try: () => stat(dir).then((info) => info.isDirectory()),
      catch: (e) => e,
    }).pipe(
      Effect.catchAll((e) =>
        codeOf(e) === "ENOENT" || codeOf(e) === "ENOTDIR" ? Effect.succeed(false) : Effect.fail(ioError(scope, ".", e)),
      ),
    )
    if (!isDir) return yield* Effect.fail(missing)
    const files = yield* Effect.forEach(names, (name) => readOne(dir, scope, name, maxFileBytes), { concurrency: 4 })
    return files.filter((f): f is File => f !== undefined)
  })
}
