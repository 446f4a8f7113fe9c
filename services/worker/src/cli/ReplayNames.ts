/**
 * Session names short enough for a terminal table. Recorded logs are often
 * named after their run's whole configuration (SWE-agent:
 * `replay__marshmallow-code__marshmallow-1867__xml_sys-env_window100__t-0.20__p-0.95__c-2.00__install-1_marshmallow-code__marshmallow-1867`);
 * the table shows the part that tells them apart, the JSON and the HTML
 * report keep the names whole.
 */

/** Sampling parameters and install flags of a SWE-agent run name (`t-0.20`, `p-0.95`, `c-2.00`, `install-1`). */
const NOISE = /^(?:[a-z]-\d+(?:\.\d+)?|install-\d+)$/

/** `id` without its repeated `_`-separated words and run parameters (unchanged when nothing is left or it has no `_`). */
export const condensed = (id: string): string => {
  const words = id.split(/_+/)
  if (words.length < 2) return id
  const seen = new Set<string>()
  const kept = words.filter((w) => {
    if (w === "" || NOISE.test(w) || seen.has(w)) return false
    seen.add(w)
    return true
  })
  return kept.length === 0 ? id : kept.join("_")
}

/** `s` in at most `width` characters: its head and tail around an ellipsis (the tail usually tells runs apart). */
export const ellipsis = (s: string, width: number): string => {
  if (s.length <= width) return s
  const tail = Math.ceil((width - 1) / 2)
  return `${s.slice(0, width - 1 - tail)}…${s.slice(s.length - tail)}`
}

/**
 * Long names (over `width`) condensed, then, among those that start with
 * the same word, without the words they all share after it (nine runs of
 * one task keep what sets them apart): `replay_xml_sys-env_window100`.
 */
const distinct = (ids: ReadonlyArray<string>, width: number): Array<string> => {
  const words = ids.map((id) => (id.length <= width ? undefined : condensed(id).split("_")))
  const groups = new Map<string, Array<ReadonlyArray<string>>>()
  for (const w of words) if (w !== undefined) groups.set(w[0]!, [...(groups.get(w[0]!) ?? []), w])
  return ids.map((id, i) => {
    const w = words[i]
    if (w === undefined) return id
    const group = groups.get(w[0]!)!
    if (group.length < 2) return w.join("_")
    const rest = w.slice(1).filter((x) => !group.every((other) => other.includes(x)))
    return rest.length === 0 ? w.join("_") : [w[0]!, ...rest].join("_")
  })
}

/**
 * Names of at most `width` characters, in order: long ones condensed (see
 * {@link distinct}), then cut around an ellipsis; names that would still be
 * equal get `~2`, `~3`... so no two rows look the same.
 */
export const shortNames = (ids: ReadonlyArray<string>, width: number): Array<string> => {
  const short = distinct(ids, width).map((s) => ellipsis(s, width))
  const count = new Map<string, number>()
  for (const s of short) count.set(s, (count.get(s) ?? 0) + 1)
  const seen = new Map<string, number>()
  return short.map((s) => {
    if (count.get(s) === 1) return s
    const n = (seen.get(s) ?? 0) + 1
    seen.set(s, n)
    const suffix = `~${n}`
    return `${ellipsis(s, width - suffix.length)}${suffix}`
  })
}
