/**
 * The reads a turn needs before its stages run, concurrently: the session's
 * stored history (only what this worker's state lacks), the agent's
 * knowledge documents (cached per tenant/agent for a few seconds), the live
 * summary (while it may have changed) and the agent's history of session
 * lengths (`LengthHistory`: cached for minutes, a bounded wait only while
 * nothing is known), when the request's `system` names a workspace, its
 * bundle (`WorkspaceCache`: files read at a miss, else from memory), and
 * whether the agent/user has any memory (when a memory store is provided and
 * the turn leaves the memory tools or memory in the prompt to it; cached like
 * the knowledge documents). Each read is applied to the session state with
 * `SessionState.advance`. The `memory` stage's search is `retrieve`,
 * performed when the stage asks.
 */
import { type Knowledge, MemoryRetrieval, Providers, type SessionLengths, ToolSearch } from "@ctxd/context"
import type { Conversation, Errors } from "@ctxd/contracts"
import { Turn } from "@ctxd/contracts"
import { KnowledgeStore, MemoryStore, SessionStore } from "@ctxd/db"
import { TokenCounter } from "@ctxd/token-counter"
import { Effect, Exit, Option } from "effect"
import { AssemblerConfig } from "./AssemblerConfig.ts"
import { CompactionPort } from "./CompactionPort.ts"
import { LengthHistory } from "./LengthHistory.ts"
import * as SessionState from "./SessionState.ts"
import { storeError } from "./Commit.ts"
import type * as Carry from "./turn/Carry.ts"
type LocalCounter = Carry.LocalCounter
import { WorkspaceCache } from "./WorkspaceCache.ts"

/** How long a worker trusts its copy of an agent's knowledge documents: 5 s (edits through this worker's endpoint invalidate at once). */
export const KNOWLEDGE_TTL_MS = 5_000

/** What {@link Gather.gather} returns. */
export interface Gathered {
  readonly state: SessionState.SessionState
  readonly knowledge: ReadonlyArray<Knowledge.Doc>
  /** The agent's history of session lengths (undefined: not known yet). */
  readonly lengths: SessionLengths.Histogram | undefined
  /** The workspace bundle's sections when the request's `system` names one (undefined: it does not). */
  readonly workspace: ReadonlyArray<Conversation.SystemSection> | undefined
  /** Whether the agent/user has any memory (undefined: not asked, or no memory store). */
  readonly memoryAny: boolean | undefined
}

/** The successes of a tuple of reads. */
type ReadsOf<T extends ReadonlyArray<Effect.Effect<unknown, unknown, unknown>>> = { -readonly [K in keyof T]: Effect.Effect.Success<T[K]> }

export class Gather extends Effect.Service<Gather>()("@ctxd/assembler/Gather", {
  effect: Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    const knowledgeStore = yield* KnowledgeStore.KnowledgeStore
    const compaction = yield* CompactionPort
    const lengthHistory = yield* LengthHistory
    const local = (yield* TokenCounter.TokenCounter).local
    const config = yield* AssemblerConfig
    const workspaces = yield* WorkspaceCache
    const memories = yield* Effect.serviceOption(MemoryStore.MemoryStore)

    /**
     * Stored counts are reused while the session's model stays in one token
     * family: the provider's own tokenizer where all its models share one
     * (Anthropic's: counted exactly or with the calibrated local
     * approximation), else one tiktoken vocabulary. A switch of family
     * recounts the stored history locally, once.
     */
    const familyOf = (model: Turn.Model): string => Providers.ofProvider(model.provider).tokenizer.stored ?? local.encodingFor(model)

    const knowledgeCache = new Map<string, { readonly docs: ReadonlyArray<Knowledge.Doc>; readonly at: number }>()
    const knowledgeOf = (tenant: string, agent: string, now: number) => {
      const key = `${tenant}\u0000${agent}`
      const hit = knowledgeCache.get(key)
      if (hit !== undefined && now - hit.at < KNOWLEDGE_TTL_MS) return Effect.succeed(hit.docs)
      return knowledgeStore.docs(tenant, agent).pipe(
        Effect.tap((docs) =>
          Effect.sync(() => {
            if (knowledgeCache.size >= config.maxSessions) knowledgeCache.clear()
            knowledgeCache.set(key, { docs, at: now })
          }),
        ),
        Effect.mapError(storeError),
      )
    }

    const memoryCache = new Map<string, { readonly any: boolean; readonly at: number }>()
    const memoryAnyOf = (scope: MemoryStore.Scope, now: number): Effect.Effect<boolean | undefined> => {
      if (Option.isNone(memories)) return Effect.succeed(undefined)
      const key = `${scope.tenant}\u0000${scope.agent}\u0000${scope.user ?? ""}`
      const hit = memoryCache.get(key)
      if (hit !== undefined && now - hit.at < KNOWLEDGE_TTL_MS) return Effect.succeed(hit.any)
      return memories.value.any(scope).pipe(
        Effect.tap((any) =>
          Effect.sync(() => {
            if (memoryCache.size >= config.maxSessions) memoryCache.clear()
            memoryCache.set(key, { any, at: now })
          }),
        ),
        // a failing store only means no memory tools this turn
        Effect.orElseSucceed(() => undefined),
      )
    }

    /** Rows after the state's last seq, counted in its family (recounted locally where stored in another). */
    const history = (tenant: string, session: string, state: SessionState.SessionState, model: Turn.Model) =>
      store.loadMessages(tenant, session, state.lastSeq).pipe(
        Effect.map((rows) => {
          const encoding = local.encodingFor(model)
          return rows.map((row) => ({
            seq: row.seq,
            message: row.message,
            tokens: row.encoding === state.family ? row.tokens : local.countMessage(row.message, encoding),
          }))
        }),
        Effect.mapError(storeError),
      )

    /**
     * The turn's reads for `cached` (this worker's state of the session, if
     * any): the history is read when there is no state in the request's token
     * family, or when `refresh` (another writer appended).
     */
    const gather = (input: {
      readonly tenant: string
      readonly session: string
      readonly model: Turn.Model
      readonly agent: string
      /** The request's `system`: a workspace reference is read. */
      readonly system?: Turn.System | undefined
      /** False: the workspace bundle's files are read, not taken from the cache (`options.workspaceCache`). */
      readonly workspaceCache?: boolean | undefined
      readonly user?: string | undefined
      /** The turn's `memoryTools` option: set (and `memory` too), the memory store is not asked. */
      readonly memoryTools?: boolean | undefined
      /** The turn's `memory` option (memory in the prompt): set (and `memoryTools` too), the memory store is not asked. */
      readonly memory?: boolean | undefined
      readonly cached: SessionState.SessionState | undefined
      readonly refresh: boolean
      /** When the turn runs (ms, the shell's clock): the cached reads' age is measured on it. */
      readonly now: number
    }): Effect.Effect<Gathered, Errors.WireError> => {
      const family = familyOf(input.model)
      const reuse = input.cached !== undefined && input.cached.family === family
      const state = reuse ? input.cached! : SessionState.empty(family)
      const reads = [
        reuse && !input.refresh ? Effect.succeed([]) : history(input.tenant, input.session, state, input.model),
        knowledgeOf(input.tenant, input.agent, input.now),
        SessionState.needsSummary(state)
          ? Effect.map(compaction.latest(input.tenant, input.session), (s) => ({ s }))
          : Effect.succeed(undefined),
        lengthHistory.get(input.tenant, input.agent),
        input.memoryTools === undefined || input.memory === undefined
          ? memoryAnyOf({ tenant: input.tenant, agent: input.agent, user: input.user }, input.now)
          : Effect.succeed(undefined),
        Turn.isWorkspaceRef(input.system)
          ? workspaces.read(input.system, input.tenant, input.workspaceCache ?? true)
          : Effect.succeed(undefined),
      ] as const
      const apply = ([rows, knowledge, summary, lengths, memoryAny, workspace]: ReadsOf<typeof reads>): Gathered => {
        SessionState.advance(state, { _tag: "Loaded", rows })
        if (summary !== undefined) SessionState.advance(state, { _tag: "SummaryRead", latest: summary.s })
        return { state, knowledge, lengths, memoryAny, workspace }
      }
      // all answered from memory (each read its own exit: the usual turn of a cached session): no runtime steps
      if (reads.every((read) => Exit.isExit(read) && Exit.isSuccess(read))) {
        return Effect.sync(() =>
          apply(reads.map((read) => (read as Exit.Success<unknown, never>).value) as unknown as ReadsOf<typeof reads>),
        )
      }
      // a fiber per read only when two or more have to wait
      const waiting = reads.filter((read) => !Exit.isExit(read)).length
      return Effect.map(Effect.all(reads, { concurrency: waiting > 1 ? "unbounded" : undefined }), apply)
    }

    /** Reads the live summary again (after a blocking compaction) into `state`. */
    const summary = (tenant: string, session: string, state: SessionState.SessionState) =>
      Effect.map(compaction.latest(tenant, session), (latest) => SessionState.advance(state, { _tag: "SummaryRead", latest }))

    const invalidateKnowledge = (tenant: string, agent: string) => Effect.sync(() => void knowledgeCache.delete(`${tenant}\u0000${agent}`))

    /**
     * Local counting in `model`'s encoding, for the stages: one counter per
     * encoding (a handful), the same object every turn, so what the pipeline
     * caches by its counter (the compressed tools and their count) carries
     * over from turn to turn.
     */
    const counters = new Map<string, LocalCounter>()
    const localFor = (model: Turn.Model): LocalCounter => {
      const encoding = local.encodingFor(model)
      let counter = counters.get(encoding)
      if (counter === undefined) {
        counter = {
          encoding,
          countText: (text) => local.countText(text, encoding),
          // deferred tools (provider tool search) are not in the prompt
          countTools: (tools) => local.countTools(ToolSearch.loaded(tools), encoding),
          countMessage: (message) => local.countMessage(message, encoding),
        }
        counters.set(encoding, counter)
      }
      return counter
    }

    /** Forgets whether `tenant`'s `agent` has memories (every user): one was stored or removed through this worker. */
    const invalidateMemory = (tenant: string, agent: string) =>
      Effect.sync(() => {
        const prefix = `${tenant}\u0000${agent}\u0000`
        for (const key of memoryCache.keys()) if (key.startsWith(prefix)) memoryCache.delete(key)
      })

    /**
     * The retrieval the `memory` stage asked for: memories for `query.text`
     * (kind `memory`) and learnings for `query.learnings` (kind `learning`; the
     * newest fill up when the search finds fewer than 5). No store, or a
     * failed search, answers nothing (the turn goes on without memory, logged).
     */
    const retrieve = (tenant: string, query: Carry.MemoryQuery): Effect.Effect<Carry.MemoryAnswer> => {
      if (Option.isNone(memories)) return Effect.succeed({ hits: [], learnings: [] })
      const memoryStore = memories.value
      const scope = { tenant, agent: query.agent, user: query.user }
      const toCandidate = (h: { readonly id: string; readonly text: string; readonly score?: number; readonly updatedAt: string }) => ({
        id: h.id,
        text: h.text,
        score: h.score ?? 0,
        updatedAt: Date.parse(h.updatedAt) || 0,
      })
      const hits =
        query.text === undefined ? Effect.succeed([]) : memoryStore.search(scope, query.text, { limit: query.limit, kind: "memory" })
      const learnings =
        query.learnings === undefined
          ? Effect.succeed([])
          : Effect.gen(function* () {
              const found =
                query.learnings === "" ? [] : yield* memoryStore.search(scope, query.learnings!, { limit: query.limit, kind: "learning" })
              if (found.length >= MemoryRetrieval.defaults.maxLearnings) return found.map(toCandidate)
              const newest = yield* memoryStore.list(scope, { kind: "learning", limit: query.limit })
              return [
                ...found.map(toCandidate),
                ...newest.documents.filter((d) => !found.some((f) => f.id === d.id)).map((d) => toCandidate({ ...d, score: 0 })),
              ]
            })
      return Effect.all([Effect.map(hits, (h) => h.map(toCandidate)), learnings], { concurrency: "unbounded" }).pipe(
        Effect.map(([hits, learnings]) => ({ hits, learnings })),
        Effect.catchAll((e) =>
          Effect.as(Effect.logWarning("memory search failed; this turn goes without memory", e._tag), { hits: [], learnings: [] }),
        ),
      )
    }

    return { gather, summary, invalidateKnowledge, invalidateMemory, retrieve, localFor } as const
  }),
}) {}
