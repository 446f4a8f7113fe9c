/**
 * Shadow mode's record: for each shadowed request, what the client sent and
 * what ctxd would have sent, each priced with prompt caching as the
 * provider bills it (`CacheSim` over the session's earlier requests of the
 * same kind, `CostModel` prices of the model): the input cost of both, and
 * the projected saving (client − ctxd). Output is the same model answering
 * the same question either way, so it is left out of the saving; the usage
 * the provider billed for the client's body is recorded beside the
 * simulation (`billed`), to check the simulation against.
 *
 * Kept per session (the newest `maxSessions`, least recently used dropped)
 * and per tenant; each record also goes to `sink` (`ctxd gateway` appends
 * them to a JSON Lines file that `ctxd inspect --shadow` reads).
 *
 * Metrics: `ctxd_gateway_shadow_requests_total{tenant}`,
 * `ctxd_gateway_shadow_input_usd_total{tenant, body}` (`body`: `client` or
 * `ctxd`), `ctxd_gateway_shadow_saved_usd{tenant}` (a gauge: this process's sum).
 */
import { CacheBlocks, CacheSim, CostModel } from "@ctxd/context"
import { LocalCounter } from "@ctxd/tokens"
import { Effect, Metric } from "effect"
import type { PromptReply, PromptRequest, UsageReport } from "./Port.ts"
import * as TurnRequests from "./TurnRequests.ts"

/** One body's side of a record. */
export interface Side {
  /** Prompt tokens (local count, the model's encoding). */
  readonly tokens: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly uncached: number
  /** Input cost in USD, caching included. */
  readonly usd: number
}

/** One shadowed request. */
export interface Record {
  readonly at: string
  readonly tenant: string
  readonly session: string
  readonly turnId: string
  readonly api: PromptRequest["api"]
  readonly model: string
  readonly client: Side
  readonly ctxd: Side
  /** `client.usd − ctxd.usd`: what ctxd would have saved on this request. */
  readonly savedUsd: number
}

/** A session's or a tenant's sums. */
export interface Totals {
  readonly requests: number
  readonly clientUsd: number
  readonly ctxdUsd: number
  readonly savedUsd: number
  readonly clientTokens: number
  readonly ctxdTokens: number
  /** The provider's billed usage of the client's requests, summed (input fields as the provider names them). */
  readonly billed: Readonly<globalThis.Record<string, number>>
}

export interface Recorder {
  /** Records ctxd's reply for a shadowed request (what would have gone upstream). */
  readonly prompted: (request: PromptRequest, reply: PromptReply) => void
  /** Records the usage billed for a shadowed request's client body. */
  readonly billed: (report: UsageReport) => void
  readonly session: (tenant: string, session: string) => Totals | undefined
  readonly tenant: (tenant: string) => Totals | undefined
}

export interface Options {
  /** Sessions kept (least recently used dropped). Default 10,000. */
  readonly maxSessions?: number | undefined
  /**
   * Tenants kept and named in the metrics' `tenant` label; past them a new
   * tenant's requests count under `_other` (a caller may name any tenant:
   * the labels stay bounded). Default 1,000.
   */
  readonly maxTenants?: number | undefined
  /** Each record, as it is made (e.g. appended to a file); errors are the sink's. */
  readonly sink?: ((record: Record) => void) | undefined
  /** Now, in ms (tests). */
  readonly now?: (() => number) | undefined
}

export const defaults = { maxSessions: 10_000, maxTenants: 1_000 } as const

/** The `tenant` label of the tenants past {@link Options.maxTenants}. */
export const OTHER = "_other"

const requestsTotal = Metric.counter("ctxd_gateway_shadow_requests_total", {
  description: "shadowed requests recorded (ctxd's reply built, the client's body sent)",
  incremental: true,
})
const inputUsdTotal = Metric.counter("ctxd_gateway_shadow_input_usd_total", {
  description: "input cost with caching of shadowed requests in USD, by body: client (what was sent) or ctxd (what ctxd would have sent)",
  incremental: true,
})
// a gauge: the sum can go down (a request where ctxd would have cost more), which a counter must not
const savedUsd = Metric.gauge("ctxd_gateway_shadow_saved_usd", {
  description:
    "projected saving of the tenant's shadowed requests so far in USD (client − ctxd input cost; negative where ctxd would have cost more)",
})

const zero: Totals = { requests: 0, clientUsd: 0, ctxdUsd: 0, savedUsd: 0, clientTokens: 0, ctxdTokens: 0, billed: {} }

const add = (t: Totals, r: Record): Totals => ({
  ...t,
  requests: t.requests + 1,
  clientUsd: t.clientUsd + r.client.usd,
  ctxdUsd: t.ctxdUsd + r.ctxd.usd,
  savedUsd: t.savedUsd + r.savedUsd,
  clientTokens: t.clientTokens + r.client.tokens,
  ctxdTokens: t.ctxdTokens + r.ctxd.tokens,
})

const addBilled = (t: Totals, usage: globalThis.Record<string, unknown>): Totals => {
  const billed = { ...t.billed }
  for (const [key, value] of Object.entries(usage))
    if (typeof value === "number" && Number.isFinite(value) && /token/i.test(key)) billed[key] = (billed[key] ?? 0) + value
  return { ...t, billed }
}

/** The body as it would go upstream, in the shape `CacheBlocks` reads (Gemini: REST keys, which it reads too). */
const upstream = (request: PromptRequest, body: globalThis.Record<string, unknown>) => ({ ...request.body, ...body })

interface SessionState {
  readonly startedAt: number
  client: CacheSim.State
  ctxd: CacheSim.State
  totals: Totals
}

const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 50_000 })

export const make = (options: Options = {}): Recorder => {
  const max = options.maxSessions ?? defaults.maxSessions
  const maxTenants = options.maxTenants ?? defaults.maxTenants
  const now = options.now ?? Date.now
  const sessions = new Map<string, SessionState>()
  const tenants = new Map<string, Totals>()
  const converters = new Map<string, (body: globalThis.Record<string, unknown>) => Array<CacheSim.Block>>()
  const keyOf = (tenant: string, session: string) => `${tenant}\u0000${session}`

  const blocksOf = (request: PromptRequest, body: globalThis.Record<string, unknown>) => {
    const provider = TurnRequests.providerOf[request.api]
    const key = `${provider}/${request.model}`
    let convert = converters.get(key)
    if (convert === undefined) {
      convert = CacheBlocks.converter(CacheBlocks.counting(counter, { provider, name: request.model.replace(/^models\//, "") }))
      converters.set(key, convert)
    }
    return convert(body)
  }

  const side = (prices: CostModel.ModelPrices, blocks: ReadonlyArray<CacheSim.Block>, usage: CostModel.Usage): Side => ({
    tokens: blocks.reduce((n, b) => n + b.tokens, 0),
    cacheRead: usage.cacheRead,
    cacheWrite: CostModel.written(usage),
    uncached: usage.uncached,
    usd: CostModel.cost(prices, { ...usage, output: 0 }),
  })

  const prompted: Recorder["prompted"] = (request, reply) => {
    const { session } = request.key
    const tenant = tenants.has(request.key.tenant) || tenants.size < maxTenants ? request.key.tenant : OTHER
    const prices = CostModel.lookup(request.model.replace(/^models\//, ""))
    const key = keyOf(request.key.tenant, session)
    const state = sessions.get(key) ?? {
      startedAt: now(),
      client: CacheSim.empty(prices),
      ctxd: CacheSim.empty(prices),
      totals: zero,
    }
    sessions.delete(key)
    sessions.set(key, state)
    if (sessions.size > max) sessions.delete(sessions.keys().next().value!)
    const at = (now() - state.startedAt) / 1000
    const clientBlocks = blocksOf(request, request.body)
    const ctxdBlocks = blocksOf(request, upstream(request, reply.body))
    const client = CacheSim.step(state.client, { at, blocks: clientBlocks })
    const ctxd = CacheSim.step(state.ctxd, { at, blocks: ctxdBlocks })
    state.client = client.state
    state.ctxd = ctxd.state
    const clientSide = side(prices, clientBlocks, client.usage)
    const ctxdSide = side(prices, ctxdBlocks, ctxd.usage)
    const record: Record = {
      at: new Date(now()).toISOString(),
      tenant: request.key.tenant,
      session,
      turnId: reply.turnId,
      api: request.api,
      model: request.model,
      client: clientSide,
      ctxd: ctxdSide,
      savedUsd: clientSide.usd - ctxdSide.usd,
    }
    state.totals = add(state.totals, record)
    const tenantTotals = add(tenants.get(tenant) ?? zero, record)
    tenants.set(tenant, tenantTotals)
    Effect.runSync(
      Effect.all([
        Metric.increment(Metric.tagged(requestsTotal, "tenant", tenant)),
        Metric.incrementBy(Metric.tagged(Metric.tagged(inputUsdTotal, "tenant", tenant), "body", "client"), clientSide.usd),
        Metric.incrementBy(Metric.tagged(Metric.tagged(inputUsdTotal, "tenant", tenant), "body", "ctxd"), ctxdSide.usd),
        Metric.set(Metric.tagged(savedUsd, "tenant", tenant), tenantTotals.savedUsd),
      ]),
    )
    options.sink?.(record)
  }

  const billed: Recorder["billed"] = (report) => {
    const state = sessions.get(keyOf(report.key.tenant, report.key.session))
    if (state !== undefined) state.totals = addBilled(state.totals, report.usage)
    const tenant = tenants.get(report.key.tenant)
    if (tenant !== undefined) tenants.set(report.key.tenant, addBilled(tenant, report.usage))
  }

  return {
    prompted,
    billed,
    session: (tenant, session) => sessions.get(keyOf(tenant, session))?.totals,
    tenant: (tenant) => tenants.get(tenant),
  }
}

/** The sums of `records` per session and per tenant (what `ctxd inspect --shadow` shows). */
export const summarize = (records: Iterable<Record>): { readonly sessions: Map<string, Totals>; readonly tenants: Map<string, Totals> } => {
  const sessions = new Map<string, Totals>()
  const tenants = new Map<string, Totals>()
  for (const r of records) {
    const key = `${r.tenant}/${r.session}`
    sessions.set(key, add(sessions.get(key) ?? zero, r))
    tenants.set(r.tenant, add(tenants.get(r.tenant) ?? zero, r))
  }
  return { sessions, tenants }
}
