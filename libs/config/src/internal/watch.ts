/**
 * Where the configuration files are, watched so that every deployment layout
 * is followed: the directory of each path (editors and Kubernetes replace a
 * file by renaming over it, which a watch of the file itself would miss), and
 * the directory of the file the path resolves to when it is a symlink (an
 * in-place edit of a target elsewhere produces no event in the link's
 * directory). A watch dies with its directory (`rm -rf dir && mkdir dir`
 * leaves it on the deleted inode), so {@link Watcher.rearm} re-resolves the
 * paths and replaces each watch whose directory is gone or is another inode;
 * the caller re-arms after every event and on a slow poll, which also catches
 * what no event reports (a directory recreated after its watch closed, network
 * file systems without inotify).
 */
import { type FSWatcher, realpathSync, statSync, watch } from "node:fs"
import { dirname, resolve } from "node:path"

export interface Watcher {
  /** Re-resolves the paths and replaces the watches of directories that are gone or were replaced. */
  readonly rearm: () => void
  readonly close: () => void
}

const identity = (dir: string): string | undefined => {
  try {
    const stat = statSync(dir)
    return stat.isDirectory() ? `${stat.dev}:${stat.ino}` : undefined
  } catch {
    return undefined
  }
}

/** The directories to watch for `paths`: each path's own, and its resolved target's. */
const directories = (paths: ReadonlyArray<string>): ReadonlySet<string> => {
  const dirs = new Set<string>()
  for (const path of paths) {
    dirs.add(dirname(resolve(path)))
    try {
      dirs.add(dirname(realpathSync(path)))
    } catch {
      // missing for now: the poll finds it again
    }
  }
  return dirs
}

/** Watches the directories of `paths`; `onEvent` runs on any event in one of them. */
export const make = (paths: ReadonlyArray<string>, onEvent: () => void): Watcher => {
  const watches = new Map<string, { readonly watcher: FSWatcher; readonly id: string }>()
  const drop = (dir: string) => {
    watches.get(dir)?.watcher.close()
    watches.delete(dir)
  }
  const rearm = () => {
    const wanted = directories(paths)
    for (const [dir, { id }] of watches) if (!wanted.has(dir) || identity(dir) !== id) drop(dir)
    for (const dir of wanted) {
      if (watches.has(dir)) continue
      const id = identity(dir)
      if (id === undefined) continue
      try {
        const watcher = watch(dir, () => onEvent())
        watcher.on("error", () => {
          if (watches.get(dir)?.watcher === watcher) drop(dir)
          onEvent()
        })
        watches.set(dir, { watcher, id })
      } catch {
        // gone between the stat and the watch: the next re-arm tries again
      }
    }
  }
  rearm()
  return { rearm, close: () => [...watches.keys()].forEach(drop) }
}

/**
 * What identifies the files' current contents without reading them: each
 * path's resolved target, device, inode, size and change times (`missing`
 * when it cannot be stat'ed). A reload runs only when this changes.
 */
export const fingerprint = (paths: ReadonlyArray<string>): string =>
  paths
    .map((path) => {
      try {
        const stat = statSync(path, { bigint: true })
        return `${realpathSync(path)}|${stat.dev}|${stat.ino}|${stat.size}|${stat.mtimeNs}|${stat.ctimeNs}`
      } catch (e) {
        return `missing:${(e as NodeJS.ErrnoException).code ?? "error"}`
      }
    })
    .join("\n")
