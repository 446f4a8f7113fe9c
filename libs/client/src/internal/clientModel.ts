/**
 * The client's records: its options, the service interface and the
 * Promise-based client of `connect` with its options. Apart from
 * `ContextClient.ts` so that the module is the behaviour (routing, refs,
 * retries) and these read as the contract; re-exported from there unchanged.
 */
import type { Health, Session, Subjects, Tokens, Turn } from "@ctxd/contracts"
import type { NatsAuth } from "@ctxd/nats"
import type { Effect } from "effect"
import type * as ClientError from "../ClientError.ts"

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** A turn request as the caller writes it: `turnId` is optional (a UUID is generated when absent). */
export type TurnInput = DistributiveOmit<Turn.TurnRequest, "turnId"> & { readonly turnId?: string | undefined }

/** Client settings. */
export interface ContextClientOptions {
  /** Subject root shared with the workers; default `ctx`. */
  readonly root?: string | undefined
  /** Timeout of one request attempt in ms; default 10 000. */
  readonly timeoutMs?: number | undefined
  /** How long transient failures are retried, in ms from the first attempt; default 10 000. 0 disables retries. */
  readonly retryForMs?: number | undefined
  /**
   * Largest request in bytes, refused locally (`TooLarge`) above it; default
   * `maxRequestBytes`. Requests above the server's `max_payload` go through
   * the object store (see below).
   */
  readonly maxPayload?: number | undefined
  /**
   * Largest request sent through the JetStream object store when it exceeds
   * the server's `max_payload`; default 64 MiB (the workers refuse more than
   * their own `CTXD_MAX_REQUEST_BYTES`).
   */
  readonly maxRequestBytes?: number | undefined
  /** Largest reply body fetched from the object store; default 256 MiB. */
  readonly maxReplyBytes?: number | undefined
  /** Send a session's turns straight to the worker that owns it (learned from replies); default true. */
  readonly direct?: boolean | undefined
  /**
   * Send `{ref}` for a session's `system` and `tools` once a reply named
   * their hashes (`refs`) and they have not changed since; a worker that does
   * not hold them answers `BadRequest` (path `system.ref`/`tools.ref`) and
   * the turn is resent in full, once. Default true.
   */
  readonly refs?: boolean | undefined
}

/** Sessions whose owner the client remembers for direct routing (least recently used forgotten first): 10,000. */
export const MAX_ROUTES = 10_000

/** The client. */
export interface ContextClientService {
  readonly subjects: Subjects.Subjects
  /** Sends one turn and returns the provider-ready request and its report. */
  readonly turn: (tenant: string, session: string, request: TurnInput) => Effect.Effect<Turn.TurnReply, ClientError.ClientError>
  /** Asks one worker for its health (one attempt, no retries). */
  readonly health: () => Effect.Effect<Health.HealthReply, ClientError.ClientError>
  /**
   * Deletes every stored row of the session (idempotent: `deleted: false`
   * when there was nothing); its next turn starts a new session. Retried
   * like a turn.
   */
  readonly deleteSession: (tenant: string, session: string) => Effect.Effect<Session.DeleteReply, ClientError.ClientError>
  /**
   * One page of the session's stored data as JSON Lines; send `nextCursor`
   * back for the next page until there is none.
   */
  readonly exportSession: (
    tenant: string,
    session: string,
    page?: { readonly cursor?: string | undefined; readonly limit?: number | undefined },
  ) => Effect.Effect<Session.ExportReply, ClientError.ClientError>
  /** Deletes the tenant's sessions whose turns carried `options.user` = `user` (again while `more`). */
  readonly deleteUser: (tenant: string, user: string) => Effect.Effect<Session.UserDeleteReply, ClientError.ClientError>
  /**
   * Reports the usage the provider billed for a turn (`<root>.v1.usage.<tenant>.<session>`);
   * retried like a turn (a second report of the same turn is answered `counted: false`).
   */
  readonly usage: (tenant: string, session: string, report: Tokens.UsageReport) => Effect.Effect<Tokens.UsageReply, ClientError.ClientError>
}

/** Default largest reply body fetched from the object store: 256 MiB. */
export const DEFAULT_MAX_REPLY_BYTES = 256 * 1024 * 1024

/** The Promise-based client returned by `ContextClient.connect`. */
export interface PromiseClient {
  /** Rejects with a {@link ClientError.ClientError}. */
  readonly turn: (tenant: string, session: string, request: TurnInput) => Promise<Turn.TurnReply>
  readonly health: () => Promise<Health.HealthReply>
  readonly deleteSession: (tenant: string, session: string) => Promise<Session.DeleteReply>
  readonly exportSession: (
    tenant: string,
    session: string,
    page?: { readonly cursor?: string | undefined; readonly limit?: number | undefined },
  ) => Promise<Session.ExportReply>
  readonly deleteUser: (tenant: string, user: string) => Promise<Session.UserDeleteReply>
  /** {@link ContextClientService.usage}. */
  readonly usage: (tenant: string, session: string, report: Tokens.UsageReport) => Promise<Tokens.UsageReply>
  /** Drains the NATS connection; the client is unusable afterwards. */
  readonly close: () => Promise<void>
}

/** Options of `ContextClient.connect`. */
export interface ConnectOptions extends ContextClientOptions {
  /** NATS server URL(s), comma separated in a string; `tls://` requires TLS. */
  readonly servers: string | ReadonlyArray<string>
  /** Connection name; default `ctxd-client`. */
  readonly name?: string | undefined
  /**
   * Prefix of the reply inboxes; default `_INBOX`. Under per-tenant NATS
   * permissions (docs/security.md, "Tenant isolation") a tenant's runtime sets the
   * prefix its user may subscribe to, e.g. `_INBOX_acme`.
   */
  readonly inboxPrefix?: string | undefined
  /**
   * NATS authentication and TLS, as the workers take them: an options object,
   * or `"env"` to read the workers' variables (`NATS_CREDS`, `NATS_NKEY_SEED`,
   * `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_TLS_CA`/`NATS_TLS_CERT`/
   * `NATS_TLS_KEY`) from this process's environment. Default none.
   */
  readonly auth?: NatsAuth.NatsAuthOptions | "env" | undefined
}
