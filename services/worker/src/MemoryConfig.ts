/**
 * The memory knobs of the worker's environment (`CTXD_MEMORY*`,
 * `CTXD_LEARNINGS_FRACTION`), part of `WorkerConfig`.
 */
import { ConfigReference } from "@ctxd/config"
import { MemoryRetrieval } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import { Config, Option } from "effect"

/**
 * The memory knobs' environment defaults, as turn options (under a tenant's
 * and a request's own; unset: `MemoryRetrieval.defaults`): `CTXD_MEMORY`
 * (`true`/`false`; unset: retrieve while the agent has memories),
 * `CTXD_MEMORY_TOKENS`, `CTXD_MEMORY_FRACTION`, `CTXD_MEMORY_PLACEMENT`
 * (`tail`/`system`), `CTXD_LEARNINGS_FRACTION`.
 */
export const memoryOptions: Config.Config<Turn.Options> = Config.all({
  memory: Config.option(
    Config.boolean("CTXD_MEMORY").pipe(
      Config.withDescription(
        "Default of the turn option memory: true retrieves the agent's memories every turn, false never (nor learnings); unset: only while the agent (and user) has memory documents, a presence check cached 5 s per worker",
      ),
    ),
  ),
  memoryTokens: Config.option(
    Config.integer("CTXD_MEMORY_TOKENS").pipe(
      ConfigReference.within({ min: 0, max: 1_000_000 }, "0..1000000 tokens"),
      Config.withDescription(
        `Default of memoryTokens: the memory budget in tokens. With neither this nor CTXD_MEMORY_FRACTION: the smaller of ${MemoryRetrieval.defaults.tokens} and ${MemoryRetrieval.defaults.fraction * 100} % of the available budget (the budget less system and tools); with both: the smaller`,
      ),
    ),
  ),
  memoryFraction: Config.option(
    Config.number("CTXD_MEMORY_FRACTION").pipe(
      ConfigReference.within({ min: 0, max: 1 }, "a fraction 0..1"),
      Config.withDescription(
        "Default of memoryFraction: the memory budget as a share of the available budget (the budget less system and tools)",
      ),
    ),
  ),
  memoryPlacement: Config.option(
    Config.literal(
      "tail",
      "system",
    )("CTXD_MEMORY_PLACEMENT").pipe(
      Config.withDescription(
        "Default of memoryPlacement: tail (after the last cache breakpoint, outside the cached prefix) or system (the last system section, inside the cached prefix: costlier in the economics bench)",
      ),
    ),
  ),
  learningsFraction: Config.option(
    Config.number("CTXD_LEARNINGS_FRACTION").pipe(
      ConfigReference.within({ min: 0, max: 1 }, "a fraction 0..1"),
      Config.withDescription(
        `Default of learningsFraction: the learnings section's share of the available budget (at most ${MemoryRetrieval.defaults.maxLearnings} learnings; 0: none)`,
      ),
    ),
  ),
}).pipe(
  Config.map((o) => {
    const out: { -readonly [K in keyof Turn.Options]?: Turn.Options[K] } = {}
    if (Option.isSome(o.memory)) out.memory = o.memory.value
    if (Option.isSome(o.memoryTokens)) out.memoryTokens = o.memoryTokens.value
    if (Option.isSome(o.memoryFraction)) out.memoryFraction = o.memoryFraction.value
    if (Option.isSome(o.memoryPlacement)) out.memoryPlacement = o.memoryPlacement.value
    if (Option.isSome(o.learningsFraction)) out.learningsFraction = o.learningsFraction.value
    return out
  }),
)
