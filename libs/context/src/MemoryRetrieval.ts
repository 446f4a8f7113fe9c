/**
 * Memory in the prompt, pure: which of the memories a store returned go into
 * a turn's prompt, and in what words. The store over-fetches
 * ({@link fetchLimit}: 3× the target count); {@link rank} re-ranks the hits
 * by text rank and recency and drops near-identical texts; {@link select}
 * fills the memory budget ({@link budget}) best first and renders the block.
 * Learnings (short lessons of the agent's earlier sessions) take the same
 * way into a system section ({@link learnings}).
 */

/** A memory as the store returned it (`score`: its text rank for the query, higher is better). */
export interface Candidate {
  readonly id: string
  readonly text: string
  readonly score: number
  /** When it was last written (ms since the epoch). */
  readonly updatedAt: number
}

/** A memory sent, with its tokens as a line of the block. */
export interface Entry {
  readonly id: string
  readonly text: string
  readonly tokens: number
}

/** What {@link select} chose: the entries, the rendered block and its tokens (≤ the budget). */
export interface Selection {
  readonly entries: ReadonlyArray<Entry>
  /** The block as sent (`""` when nothing fits). */
  readonly text: string
  readonly tokens: number
}

/**
 * The defaults: 2,200 tokens or 15 % of the available budget for retrieved
 * memory (the smaller of the two when neither is configured), 8 memories
 * wanted (the store is asked for 3× as many), ranked 70 % on text rank and
 * 30 % on recency (half-life 30 days), texts whose word sets overlap by 85 %
 * or more (Jaccard) counted as one; learnings: at most 5 in 5 % of the
 * available budget.
 */
export const defaults = {
  tokens: 2_200,
  fraction: 0.15,
  count: 8,
  overFetch: 3,
  textWeight: 0.7,
  halfLifeDays: 30,
  duplicate: 0.85,
  learningsFraction: 0.05,
  maxLearnings: 5,
} as const

/** The memory knobs of a turn (absent: {@link defaults}). */
export interface Knobs {
  readonly tokens?: number | undefined
  readonly fraction?: number | undefined
}

/**
 * The memory budget in tokens out of `available` (the budget less system
 * and tools): `tokens` when only it is set, `fraction × available` when only
 * that is, the smaller when both are, and the smaller of the two defaults
 * when neither is; never more than `available`.
 */
export const budget = (available: number, knobs: Knobs = {}): number => {
  const room = Math.max(0, Math.floor(available))
  const byFraction = (f: number) => Math.floor(f * room)
  const { tokens, fraction } = knobs
  const chosen =
    tokens === undefined && fraction === undefined
      ? Math.min(defaults.tokens, byFraction(defaults.fraction))
      : Math.min(tokens ?? Number.POSITIVE_INFINITY, fraction === undefined ? Number.POSITIVE_INFINITY : byFraction(fraction))
  return Math.max(0, Math.min(room, chosen))
}

/** Hits to ask the store for when `count` memories are wanted: 3× (at least 1). */
export const fetchLimit = (count: number = defaults.count): number => Math.max(1, count * defaults.overFetch)

const DAY_MS = 86_400_000

/** The words of a text, lowercased (letters and digits of any script). */
const words = (text: string): Set<string> => new Set(text.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? [])

/** Jaccard similarity of two word sets (two empty texts are identical). */
export const similarity = (a: string, b: string): number => {
  const x = words(a)
  const y = words(b)
  if (x.size === 0 && y.size === 0) return 1
  let common = 0
  for (const w of x) if (y.has(w)) common++
  return common / (x.size + y.size - common)
}

/**
 * The candidates best first, near-duplicates dropped: each scored
 * `textWeight × score / best score + (1 − textWeight) × 0.5^(age / half-life)`
 * (ties: newer, then smaller id), and a candidate whose words overlap a
 * better one's by {@link defaults.duplicate} or more left out (and so are
 * blank texts). Deterministic: the input order does not matter.
 */
export const rank = (candidates: ReadonlyArray<Candidate>, now: number): ReadonlyArray<Candidate> => {
  const best = Math.max(0, ...candidates.map((c) => (Number.isFinite(c.score) ? c.score : 0)))
  const scored = candidates
    .filter((c) => c.text.trim() !== "")
    .map((c) => {
      const text = best > 0 && Number.isFinite(c.score) ? Math.max(0, c.score) / best : 0
      const ageDays = Math.max(0, now - c.updatedAt) / DAY_MS
      const recency = Math.pow(0.5, ageDays / defaults.halfLifeDays)
      return { c, value: defaults.textWeight * text + (1 - defaults.textWeight) * recency }
    })
    .sort((a, b) => b.value - a.value || b.c.updatedAt - a.c.updatedAt || (a.c.id < b.c.id ? -1 : a.c.id > b.c.id ? 1 : 0))
  const kept: Array<Candidate> = []
  for (const { c } of scored) {
    if (kept.some((k) => k.id === c.id || similarity(k.text, c.text) >= defaults.duplicate)) continue
    kept.push(c)
  }
  return kept
}

/** The first line of the memory block. */
export const MEMORY_HEADER = "Relevant memories (retrieved for this message; they may be outdated):"
/** The first line of the learnings section. */
export const LEARNINGS_HEADER = "Lessons learned in earlier sessions of this agent:"
/** The id of the learnings system section. */
export const LEARNINGS_SECTION_ID = "ctxd-learnings"

/** A memory's text as one line of the block (its own line breaks folded). */
const line = (text: string): string => `- ${text.trim().replace(/\s*\n\s*/g, " ")}`

/** The block of `header` and one line per entry (`""` without entries). */
export const render = (header: string, texts: ReadonlyArray<string>): string =>
  texts.length === 0 ? "" : [header, ...texts.map(line)].join("\n")

/**
 * The ranked candidates (best first) that fit `budget` tokens as one block
 * under `header`, at most `count`: each goes in when the block with it still
 * fits (a larger one is passed over for smaller ones after it). The block is
 * counted whole at the end, and entries come off the end until it fits, so
 * `tokens ≤ budget` whatever the counter.
 */
export const select = (
  ranked: ReadonlyArray<Candidate>,
  options: {
    readonly budget: number
    readonly count: number
    readonly countText: (text: string) => number
    readonly header?: string | undefined
  },
): Selection => {
  const header = options.header ?? MEMORY_HEADER
  const empty: Selection = { entries: [], text: "", tokens: 0 }
  if (options.budget <= 0 || options.count <= 0 || ranked.length === 0) return empty
  // a line break joins two lines: one token for each, on top of the lines' own
  let used = options.countText(header)
  const entries: Array<Entry> = []
  for (const c of ranked) {
    if (entries.length >= options.count) break
    const tokens = options.countText(line(c.text))
    if (used + 1 + tokens > options.budget) continue
    entries.push({ id: c.id, text: c.text, tokens })
    used += 1 + tokens
  }
  for (;;) {
    if (entries.length === 0) return empty
    const text = render(
      header,
      entries.map((e) => e.text),
    )
    const tokens = options.countText(text)
    if (tokens <= options.budget) return { entries, text, tokens }
    entries.pop()
  }
}

/**
 * The agent's learnings for a session's system section: at most
 * `max` (default 5) of the candidates, best first as {@link rank} orders
 * them, within `budget` tokens.
 */
export const learnings = (
  candidates: ReadonlyArray<Candidate>,
  options: {
    readonly now: number
    readonly budget: number
    readonly countText: (text: string) => number
    readonly max?: number | undefined
  },
): Selection =>
  select(rank(candidates, options.now), {
    budget: options.budget,
    count: Math.min(defaults.maxLearnings, options.max ?? defaults.maxLearnings),
    countText: options.countText,
    header: LEARNINGS_HEADER,
  })

/**
 * The query to retrieve for: the latest user message's text, and the
 * active task's (the session's first user request, when it is another
 * message), each cut to 500 characters.
 */
export const query = (latest: string | undefined, task: string | undefined): string => {
  const cut = (t: string) => t.trim().slice(0, 500)
  const parts = [latest, task].filter((t): t is string => t !== undefined && t.trim() !== "").map(cut)
  return [...new Set(parts)].join("\n")
}
