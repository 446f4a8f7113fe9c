/**
 * Subject names of wire contract v1.
 *
 * Every subject starts with a configurable root (default `ctx`), so several
 * ctxd deployments (or test runs) can share one NATS server without hearing
 * each other: `<root>.v1.turn.<tenant>.<session>`.
 */
import { Schema } from "effect"

/** Tenant and session ids: 1 to 128 characters of `[A-Za-z0-9_-]`. */
export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{1,128}$/

/** A tenant id as it may appear in a subject token. */
export const TenantId = Schema.String.pipe(
  Schema.pattern(TOKEN_PATTERN, { message: () => "tenant must match [A-Za-z0-9_-]{1,128}" }),
  Schema.annotations({ identifier: "TenantId", description: "Tenant id: 1-128 chars of [A-Za-z0-9_-]" }),
)

/** A session id as it may appear in a subject token. */
export const SessionId = Schema.String.pipe(
  Schema.pattern(TOKEN_PATTERN, { message: () => "session must match [A-Za-z0-9_-]{1,128}" }),
  Schema.annotations({ identifier: "SessionId", description: "Session id: 1-128 chars of [A-Za-z0-9_-]" }),
)

/** The default subject root. */
export const DEFAULT_ROOT = "ctx"

/** Turn reply header: the id of the worker that handled the turn. */
export const WORKER_HEADER = "ctxd-worker"

/**
 * Turn reply header: the direct subject prefix of the worker that handled
 * the turn ({@link Subjects.worker}); a client may send the session's next
 * turns to `<prefix>.turn.<tenant>.<session>` (that worker answers
 * `NotOwner` once the session's shard has moved).
 */
export const DIRECT_HEADER = "ctxd-direct"

/** Request header (value `1`) of a turn one worker forwarded to another; it is never forwarded again. */
export const FORWARDED_HEADER = "ctxd-forwarded"

/** True when `token` is a valid tenant or session token. */
export const isValidToken = (token: string): boolean => TOKEN_PATTERN.test(token)

/** Subject builders for one subject root. */
export interface Subjects {
  readonly root: string
  /** `<root>.v1.turn.<tenant>.<session>` */
  readonly turn: (tenant: string, session: string) => string
  /** `<root>.v1.turn.>`: what a worker subscribes to. */
  readonly turnWildcard: string
  /** `<root>.v1.usage.<tenant>.<session>` */
  readonly usage: (tenant: string, session: string) => string
  /** `<root>.v1.usage.>`: what a worker subscribes to for usage reports. */
  readonly usageWildcard: string
  /**
   * `<root>.v1.tokens.count`: the tenant-less count subject, kept for old
   * callers; a deployment that scopes tenants by NATS permissions turns it
   * off (`CTXD_LEGACY_SUBJECTS=false`) and uses {@link tokensCountFor}.
   */
  readonly tokensCount: string
  /** `<root>.v1.tokens.count.<tenant>`: a count on behalf of a tenant (its own calibration factor). */
  readonly tokensCountFor: (tenant: string) => string
  /** `<root>.v1.tokens.count.*`: what a worker subscribes to. */
  readonly tokensCountWildcard: string
  /** `<root>.v1.health` */
  readonly health: string
  /** `<root>.v1.knowledge.<tenant>` */
  readonly knowledge: (tenant: string) => string
  /** `<root>.v1.knowledge.*`: what a worker subscribes to. */
  readonly knowledgeWildcard: string
  /** The tenant token of a knowledge subject. */
  readonly parseKnowledge: (subject: string) => string | undefined
  /** `<root>.v1.memory.<tenant>` */
  readonly memory: (tenant: string) => string
  /** `<root>.v1.memory.*`: what a worker subscribes to. */
  readonly memoryWildcard: string
  /** The tenant token of a memory subject. */
  readonly parseMemory: (subject: string) => string | undefined
  /** `<root>.v1.loop.check` */
  readonly loopCheck: string
  /** `<root>.v1.metrics` */
  readonly metrics: string
  /**
   * `<root>.v1.summarize`: the tenant-less summarize subject, kept for old
   * callers; a deployment that scopes tenants by NATS permissions turns it
   * off (`CTXD_LEGACY_SUBJECTS=false`) and uses {@link summarizeFor}.
   */
  readonly summarize: string
  /** `<root>.v1.summarize.<tenant>`: a summary on behalf of a tenant. */
  readonly summarizeFor: (tenant: string) => string
  /** `<root>.v1.summarize.*`: what a worker subscribes to. */
  readonly summarizeWildcard: string
  /**
   * The tenant token of a tenant-scoped summarize or tokens.count subject
   * (`<root>.v1.<verb>.<tenant>`); undefined for the tenant-less ones and
   * anything else.
   */
  readonly parseTenant: (subject: string) => string | undefined
  /** `<root>.v1.compact.<tenant>.<session>`: a manual compaction. */
  readonly compact: (tenant: string, session: string) => string
  /** `<root>.v1.compact.>`: what a compactor subscribes to. */
  readonly compactWildcard: string
  /** `<root>.v1.learn.<tenant>.<session>`: fold the session into learnings of its agent. */
  readonly learn: (tenant: string, session: string) => string
  /** `<root>.v1.learn.>`: what a worker subscribes to. */
  readonly learnWildcard: string
  /** `<root>.v1.compactjob.<tenant>.<session>`: compaction jobs on the JetStream work queue. */
  readonly compactJob: (tenant: string, session: string) => string
  /** `<root>.v1.compactjob.>`: the work queue stream's subjects. */
  readonly compactJobWildcard: string
  /** `<root>.v1.session.<tenant>.<session>`: a session's stored data on request (delete, export). */
  readonly session: (tenant: string, session: string) => string
  /** `<root>.v1.session.*.*`: what a worker subscribes to. */
  readonly sessionWildcard: string
  /** `<root>.v1.user.<tenant>`: a tenant's user's data on request (deleteUser). */
  readonly user: (tenant: string) => string
  /** `<root>.v1.user.*`: what a worker subscribes to. */
  readonly userWildcard: string
  /** The tenant token of a user subject. */
  readonly parseUser: (subject: string) => string | undefined
  /**
   * `<root>.v1.worker.<workerId>`: the prefix of one worker's direct subjects
   * (`<prefix>.turn.<tenant>.<session>`, served by that worker alone).
   */
  readonly worker: (workerId: string) => string
  /** Parses the tenant and session tokens out of a turn, usage, compact, compactjob, learn or session subject. */
  readonly parseSession: (subject: string) => { readonly tenant: string; readonly session: string } | undefined
}

/** Builds the subjects under `root` (default `ctx`). */
export const make = (root: string = DEFAULT_ROOT): Subjects => {
  const prefix = `${root}.v1.`
  // index of the tenant token: the root's tokens, then "v1" and the verb
  const depth = root.split(".").length + 2
  return {
    root,
    turn: (tenant, session) => `${prefix}turn.${tenant}.${session}`,
    turnWildcard: `${prefix}turn.>`,
    usage: (tenant, session) => `${prefix}usage.${tenant}.${session}`,
    usageWildcard: `${prefix}usage.>`,
    tokensCount: `${prefix}tokens.count`,
    tokensCountFor: (tenant) => `${prefix}tokens.count.${tenant}`,
    tokensCountWildcard: `${prefix}tokens.count.*`,
    health: `${prefix}health`,
    loopCheck: `${prefix}loop.check`,
    metrics: `${prefix}metrics`,
    knowledge: (tenant) => `${prefix}knowledge.${tenant}`,
    knowledgeWildcard: `${prefix}knowledge.*`,
    parseKnowledge: (subject) => {
      if (!subject.startsWith(`${prefix}knowledge.`)) return undefined
      const tenant = subject.slice(`${prefix}knowledge.`.length)
      return isValidToken(tenant) ? tenant : undefined
    },
    memory: (tenant) => `${prefix}memory.${tenant}`,
    memoryWildcard: `${prefix}memory.*`,
    parseMemory: (subject) => {
      if (!subject.startsWith(`${prefix}memory.`)) return undefined
      const tenant = subject.slice(`${prefix}memory.`.length)
      return isValidToken(tenant) ? tenant : undefined
    },
    summarize: `${prefix}summarize`,
    summarizeFor: (tenant) => `${prefix}summarize.${tenant}`,
    summarizeWildcard: `${prefix}summarize.*`,
    parseTenant: (subject) => {
      for (const verb of ["summarize.", "tokens.count."]) {
        if (!subject.startsWith(`${prefix}${verb}`)) continue
        const tenant = subject.slice(`${prefix}${verb}`.length)
        return isValidToken(tenant) ? tenant : undefined
      }
      return undefined
    },
    compact: (tenant, session) => `${prefix}compact.${tenant}.${session}`,
    compactWildcard: `${prefix}compact.>`,
    learn: (tenant, session) => `${prefix}learn.${tenant}.${session}`,
    learnWildcard: `${prefix}learn.>`,
    compactJob: (tenant, session) => `${prefix}compactjob.${tenant}.${session}`,
    compactJobWildcard: `${prefix}compactjob.>`,
    session: (tenant, session) => `${prefix}session.${tenant}.${session}`,
    sessionWildcard: `${prefix}session.*.*`,
    user: (tenant) => `${prefix}user.${tenant}`,
    userWildcard: `${prefix}user.*`,
    parseUser: (subject) => {
      if (!subject.startsWith(`${prefix}user.`)) return undefined
      const tenant = subject.slice(`${prefix}user.`.length)
      return isValidToken(tenant) ? tenant : undefined
    },
    worker: (workerId) => `${prefix}worker.${workerId}`,
    parseSession: (subject) => {
      if (!subject.startsWith(prefix)) return undefined
      const tokens = subject.split(".")
      if (tokens.length !== depth + 2) return undefined
      const tenant = tokens[depth]!
      const session = tokens[depth + 1]!
      return isValidToken(tenant) && isValidToken(session) ? { tenant, session } : undefined
    },
  }
}
