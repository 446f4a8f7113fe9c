/** Command-line options of `npm run bench` (after the bench name filter). */
import type { Turn } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"

/** The value after `--<name>`, if given. */
export const argument = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i !== -1 ? process.argv[i + 1] : undefined
}

/** The request formats of `--format` (one format, or `all`), else `fallback`. */
export const formats = (fallback: ReadonlyArray<Turn.Format>): ReadonlyArray<Turn.Format> => {
  const wanted = argument("format")
  if (wanted === undefined) return fallback
  if (wanted === "all") return Workloads.formats
  const format = Workloads.formats.find((f) => f === wanted)
  if (format === undefined) throw new Error(`--format must be all or one of ${Workloads.formats.join(", ")}`)
  return [format]
}
