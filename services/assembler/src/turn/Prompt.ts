/**
 * Stage `prompt`: the context pipeline of `@ctxd/context` (window →
 * compress → mask → budget → prune → render → proactive) over the view,
 * with what the session remembers for cache stability (landmarks, mask
 * grid, proactive rung) while the view is the same.
 *
 * The first prompt of a session that masks a tool result is run again with
 * the virtual `recall` tool added (prepared by `tools`, which this stage
 * then updates): its tool list changes in the turn whose prefix masking
 * changes anyway, and stays so. That one turn counts the added tool locally.
 *
 * When a newer summary is ready (`compaction.held`), the prompt is built on
 * both views and the swap made only when it pays (`CachePlanner.swapSummary`);
 * held back, the previous view is the one sent and kept.
 */
import { CachePlanner, CostModel, Knowledge, Ledger, MemoryRetrieval, Pipeline, Providers, SessionLengths } from "@ctxd/context"
import type { Conversation, Turn } from "@ctxd/contracts"
import * as SessionState from "../SessionState.ts"
import * as Carry from "./Carry.ts"
import * as Inline from "./Inline.ts"

/**
 * Turns the session is expected to go on for after this one: the request's
 * `expectedTurns` when it names one; otherwise, from the tenant's agent's
 * history of session lengths, the mean of what the sessions that got as far
 * went on for (`SessionLengths.estimate`, measured against the session's
 * turns once `fresh` is stored); when fewer than 20 got as far (or the
 * history is unknown), the rule of thumb: half the turns the session has had
 * before this one, at least 1.
 */
export const expectedTurns = (inputs: Carry.Inputs, fresh: ReadonlyArray<SessionState.Row>): number =>
  inputs.options.cache.expectedTurns ??
  SessionLengths.expectedTurns(inputs.lengths, SessionState.turnsAfter(inputs.state, fresh), SessionLengths.rule(inputs.state.turns))

/**
 * The cache planner's inputs for this turn: the model's prices (the
 * configured table, `AssemblerConfig.prices`: read and write multipliers,
 * the tiers, the minimum cacheable prefix), the previous prompt while the
 * view is the same, whether the cache has gone cold since the previous turn
 * (under the TTL that prompt was sent with), how long the session is
 * expected to go on ({@link expectedTurns}; `fresh`: this turn's new rows),
 * and the cache tier: with `options.cacheTtlSeconds` that
 * TTL under the model's default tier; else, for Anthropic, 5 minutes or
 * 1 hour, whichever the session's observed gaps make cheaper
 * (`CachePlanner.chooseTier`).
 */
export const cachePlan = (inputs: Carry.Inputs, sameView: boolean, fresh: ReadonlyArray<SessionState.Row>): CachePlanner.Plan => {
  const { state, options, prices, now, request } = inputs
  const tier =
    options.cache.ttlSeconds !== undefined
      ? CostModel.tier(prices)
      : tierFor(request.format, prices, state, now, options.cache.edits === "guarded")
  const ttlSeconds = options.cache.ttlSeconds ?? tier.ttlSeconds
  const previousTtl = state.shape?.ttlSeconds ?? ttlSeconds
  return {
    previous: sameView ? state.shape : undefined,
    viewChanged: !sameView && state.shape !== undefined,
    read: prices.cacheReadMultiplier,
    write: tier.writeMultiplier,
    expectedTurns: expectedTurns(inputs, fresh),
    cold: state.lastAt !== undefined && now - state.lastAt > previousTtl * 1000,
    ttlSeconds,
    minCacheable: Math.floor(prices.minCacheableTokens * MIN_PREFIX_MARGIN),
    providerMinCacheable: prices.minCacheableTokens,
    tier: tier.name,
    outputMultiplier: prices.inputPerMtok > 0 ? prices.outputPerMtok / prices.inputPerMtok : undefined,
    ...(options.cache.edits === "expected" ? {} : { ledger: state.ledger ?? Ledger.start }),
    defaultWrite: CostModel.tier(prices).writeMultiplier,
  }
}

/**
 * The provider's minimum cacheable prefix is planned with 10 % off: local
 * counts can fall a few percent short of the provider's, and near the
 * minimum the cheaper mistake is to treat a prefix as cached (an edit held
 * back costs a few tokens' reads; an edit made every turn on a prompt wrongly
 * thought uncacheable re-writes it every turn).
 */
export const MIN_PREFIX_MARGIN = 0.9

/**
 * The tiers a request can ask for: Anthropic breakpoints say `5m` or `1h`; a Responses body asks for
 * `24h` where the model has it (`prompt_cache_retention`); an OpenAI model with explicit breakpoints
 * the TTLs its API names in `prompt_cache_options` (`30m`; `12h` on Responses); elsewhere the model's
 * default only. A tier whose writes cost more than the default's is chosen only while the session's
 * savings against its whole history cover the difference on what this turn writes (`Ledger`).
 */
const tierFor = (
  format: Turn.Format,
  prices: CostModel.ModelPrices,
  state: Carry.Inputs["state"],
  now: number,
  guarded: boolean,
): CostModel.CacheTier => {
  const rules = Providers.of(format).cacheRules
  // an OpenAI model with explicit breakpoints names its TTL in `prompt_cache_options` (the retention is deprecated there)
  const explicit = prices.capabilities.explicitCacheBreakpoints && rules.explicitTtls !== undefined
  if (!explicit && rules.retention !== undefined) return prices.tiers.find((t) => t.name === rules.retention) ?? CostModel.tier(prices)
  const ttls = explicit ? rules.explicitTtls! : rules.ttls
  const expressible = prices.tiers.filter((t) => ttls.includes(t.name))
  if (expressible.length < 2) return CostModel.tier(prices)
  const prompt = state.shape?.total ?? 0
  // a prompt not surely cacheable (within the counts' margin of the minimum) has nothing to keep
  // through a pause: the dearer tier waits until it is
  const cacheable = prompt * MIN_PREFIX_MARGIN >= prices.minCacheableTokens
  if (guarded && !cacheable) return CostModel.tier(prices)
  const perTurn = state.tokens / Math.max(1, state.turns)
  const chosen = CachePlanner.chooseTier(expressible, prices.cacheReadMultiplier, state.gaps, prompt, perTurn)
  // a dearer write than the whole history's (its default tier) is paid from the session's savings, as an edit is:
  // on what this turn writes, the whole prompt when nothing is cached
  const shape = state.shape
  const cached =
    shape !== undefined &&
    state.lastAt !== undefined &&
    now - state.lastAt <= (shape.ttlSeconds ?? CostModel.tier(prices).ttlSeconds) * 1000
  const extra = (chosen.writeMultiplier - CostModel.tier(prices).writeMultiplier) * (cached ? perTurn : prompt + perTurn)
  return !guarded || extra <= 0 || extra <= Ledger.spendable(state.ledger ?? Ledger.start) ? chosen : CostModel.tier(prices)
}

/**
 * `local` with its text counts remembered for one turn: the planner builds
 * the prompt several times (held and advanced candidates, the summary swap,
 * the knowledge index), and each build counts the same masked references
 * again. Its tool counter stays the turn's (the same function every turn of
 * an encoding): the pipeline keeps a compressed tool list and its count by
 * that counter, from turn to turn.
 */
const memoized = (local: Carry.LocalCounter): Carry.LocalCounter => {
  const texts = new Map<string, number>()
  return {
    ...local,
    countText: (text) => {
      let n = texts.get(text)
      if (n === undefined) texts.set(text, (n = local.countText(text)))
      return n
    },
  }
}

type CountTools = Carry.LocalCounter["countTools"]
const scaledCounters = new WeakMap<CountTools, WeakMap<ReadonlyArray<unknown>, Map<number, CountTools>>>()

/**
 * Counts a tool list the pipeline derives from `full` (compressed at some
 * level) locally, scaled by `fullTokens` over the local count of `full`: the
 * counter's count of the list as given (the provider's, when it counted) sets
 * the ratio, so a compressed list is counted on the same scale. One function
 * per turn counter, list and count (the pipeline caches compressed lists by it).
 */
const scaledCountTools = (countTools: CountTools, full: ReadonlyArray<unknown>, fullTokens: number): CountTools => {
  let byList = scaledCounters.get(countTools)
  if (byList === undefined) scaledCounters.set(countTools, (byList = new WeakMap()))
  let byTokens = byList.get(full)
  if (byTokens === undefined) byList.set(full, (byTokens = new Map<number, CountTools>()))
  let scaled = byTokens.get(fullTokens)
  if (scaled === undefined) {
    const local = countTools(full as Parameters<CountTools>[0])
    const ratio = local > 0 && fullTokens > 0 ? fullTokens / local : 1
    byTokens.set(fullTokens, (scaled = (tools) => Math.round(countTools(tools) * ratio)))
  }
  return scaled
}

/**
 * The system sections with the session's learnings section (`Memory`) after
 * the request's own and before the knowledge index, which may change within
 * a session while the learnings do not.
 */
const withLearnings = (system: ReadonlyArray<Conversation.SystemSection>, text: string): ReadonlyArray<Conversation.SystemSection> => {
  const at = system.findIndex((s) => s.id === Knowledge.SECTION_ID)
  const section: Conversation.SystemSection = { id: MemoryRetrieval.LEARNINGS_SECTION_ID, text, cache: "5m" }
  return at === -1 ? [...system, section] : [...system.slice(0, at), section, ...system.slice(at)]
}

/** `carry` with the learnings section in the system (and its tokens in the system's count) from here on. */
const learned = (carry: Carry.Carry): Carry.Carry => {
  const text = carry.memory?.learnings?.text ?? ""
  if (text === "") return carry
  const tools = Carry.section(carry, "tools")
  const count = Carry.section(carry, "count")
  const held = tools.knowledge.ifHeld
  return {
    ...carry,
    tools: {
      ...tools,
      system: withLearnings(tools.system, text),
      knowledge:
        held === undefined ? tools.knowledge : { ...tools.knowledge, ifHeld: { ...held, system: withLearnings(held.system, text) } },
    },
    count: { ...count, count: { ...count.count, systemTokens: count.count.systemTokens + carry.memory!.learnings!.tokens } },
  }
}

export const stage: Carry.Stage = {
  name: "prompt",
  run: (given) => {
    const base = { ...given, inputs: { ...given.inputs, local: memoized(given.inputs.local) } }
    const mid = Inline.applies(base.inputs)
    const carry = mid ? Inline.inline(base) : learned(base)
    // the appended system message is stored with the turn's rows
    const kept = mid ? { count: carry.count, compaction: carry.compaction } : {}
    const next = (done: Partial<Carry.Carry>) => Carry.next({ ...given, ...kept, ...done })
    const compaction = Carry.section(carry, "compaction")
    const swapped = build(carry, compaction.view, compaction.sameView)
    if (compaction.held === undefined) return next(swapped)
    // a newer summary is ready: swapping it in re-writes everything after the system and the
    // tools, an edit made only when it pays (like a window or mask edit)
    const held = build(carry, compaction.held, true)
    const builtOf = (p: Pipeline.Output): CachePlanner.Built => ({
      total: p.report.tokens.total,
      overBudget: p.report.overBudget,
      expectedReadTokens: p.report.cache.expectedReadTokens ?? 0,
      expectedWriteTokens: p.report.cache.expectedWriteTokens ?? p.report.tokens.total,
    })
    if (
      CachePlanner.swapSummary(
        cachePlan(carry.inputs, true, Carry.section(carry, "count").fresh),
        builtOf(held.prompt),
        builtOf(swapped.prompt),
      )
    )
      return next(swapped)
    const prompt = held.prompt
    return next({
      tools: held.tools,
      compaction: { ...compaction, view: compaction.held, sameView: true, held: undefined },
      prompt: { ...prompt, report: { ...prompt.report, cache: { ...prompt.report.cache, summaryDeferred: true } } },
    })
  },
}

/** A changed knowledge index is held back at most this long (ms): 1 hour. */
export const KNOWLEDGE_HOLD_MS = 3_600_000

/** Reasons a prompt re-writes everything after the system (or more): a change there costs (almost) nothing extra. */
const rewritesAfterSystem = new Set<string>(["first_turn", "ttl_expired", "tools", "system", "summary", "window"])

type Built = { readonly prompt: Pipeline.Output; readonly tools: Carry.ToolsOut }

/**
 * The prompt over `view` (`sameView`: the previous turn's, extended, so its
 * landmarks, mask grid and shape carry over), and the tools it goes with. A
 * changed knowledge index (it only grows the prompt, it saves nothing) is
 * held back until the prompt re-writes everything after the system anyway,
 * or for at most {@link KNOWLEDGE_HOLD_MS}; `load_knowledge` answers every
 * current document meanwhile.
 */
const build = (carry: Carry.Carry, view: Carry.CompactionOut["view"], sameView: boolean): Built => {
  const tools = Carry.section(carry, "tools")
  const { count } = Carry.section(carry, "count")
  const held = tools.knowledge.ifHeld
  if (held === undefined) return buildWith(carry, view, sameView, tools, count.systemTokens)
  const { local, now } = carry.inputs
  const systemTokens = Math.max(0, count.systemTokens - local.countText(tools.knowledge.sent) + local.countText(held.text))
  const kept = buildWith(
    carry,
    view,
    sameView,
    { ...tools, system: held.system, knowledge: { sent: held.text, since: held.since } },
    systemTokens,
  )
  const reason = kept.prompt.report.cache.reason ?? "first_turn"
  if (!rewritesAfterSystem.has(reason) && now - held.since < KNOWLEDGE_HOLD_MS) return kept
  return buildWith(carry, view, sameView, tools, count.systemTokens)
}

const buildWith = (
  carry: Carry.Carry,
  view: Carry.CompactionOut["view"],
  sameView: boolean,
  tools: Carry.ToolsOut,
  systemTokens: number,
): Built => {
  const { tenant, session, request, model, options, state, local } = carry.inputs
  const { count, fresh } = Carry.section(carry, "count")
  const loop = Carry.section(carry, "loop")
  const plan = cachePlan(carry.inputs, sameView, fresh)
  const run = (sent: typeof tools.sent, toolsTokens: number) =>
    Pipeline.run({
      tenant,
      session,
      format: request.format,
      model,
      system: tools.system,
      systemTokens,
      tools: sent,
      toolsTokens,
      toolOrder: "given",
      midConversationSystem: Inline.applies(carry.inputs),
      countTools: scaledCountTools(local.countTools, sent, toolsTokens),
      countText: local.countText,
      history: view.messages,
      landmarks: sameView ? state.landmarks : undefined,
      maskGrid: sameView ? state.maskGrid : undefined,
      proactiveRung: state.rung,
      cachePlan: plan,
      // what the previous prompt sent, in the same view (indices of another view do not compare): bound reasoning is checked against it
      bound: sameView ? state.shape?.bound : undefined,
      bindsReasoning: carry.inputs.prices.capabilities.bindsReasoningToPrefix,
      previousResponseId: "previousResponseId" in request ? request.previousResponseId : undefined,
      storedTokens: count.messageTokens.reduce((sum, n) => sum + n, state.tokens),
      trailer: loop.trailer,
      memory: carry.memory?.memory,
      options: options.pipeline,
      counter: {
        backend: count.backend,
        encoding: count.encoding,
        exact: count.exact,
        calibration: count.calibration,
        ...(count.fallback === undefined ? {} : { fallback: count.fallback }),
      },
    })
  const prompt = run(tools.sent, count.toolsTokens)
  const alternative = tools.recall.ifMasked
  if (alternative === undefined || (prompt.report.masking?.masked ?? 0) === 0) return { prompt, tools }
  const added = Math.max(0, local.countTools(alternative.sent) - local.countTools(tools.sent))
  // Offering `recall` changes the tool list, and so the whole cached prefix: it waits for a
  // moment when that prefix is lost anyway (the cache is cold, or the system or the tools change
  // this turn); until then masked references go out, and ctxd still answers a `recall` call.
  const reason = prompt.report.cache.reason ?? "first_turn"
  const free = plan.cold || plan.previous === undefined || (rewritesAfterSystem.has(reason) && reason !== "window")
  if (!free) return { prompt, tools }
  return {
    prompt: run(alternative.sent, count.toolsTokens + added),
    tools: { ...tools, sent: alternative.sent, waste: alternative.waste, recall: { offered: true } },
  }
}
