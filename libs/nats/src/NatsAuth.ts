/**
 * How a NATS connection authenticates and encrypts: one of a credentials
 * file (user JWT + seed), an NKey seed, a user and password, or a token, and
 * TLS (a CA, a client certificate and key; required when a server URL is
 * `tls://`), from the standard variables (`NATS_CREDS`, `NATS_NKEY_SEED`,
 * `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_TLS_CA`/`NATS_TLS_CERT`/
 * `NATS_TLS_KEY`) or from an options object.
 *
 * Secrets are held as `Redacted` and unwrapped only inside the nats.js
 * authenticators. Every file is read when the options are resolved
 * ({@link resolve}), so a missing or unreadable file fails at start with a
 * {@link NatsAuthError} that names the variable and the path, never a secret.
 * Credentials in a server URL (`nats://user:pass@host`, `nats://token@host`),
 * which nats.js would ignore, are taken as user and password (or token) and
 * removed from the URLs the connection and its messages show.
 */
import * as ConfigReference from "@ctxd/config/ConfigReference"
import {
  credsAuthenticator,
  type Authenticator,
  type NodeConnectionOptions,
  nkeyAuthenticator,
  nkeys,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
} from "@nats-io/transport-node"
import { Config, Data, Either, Option, Redacted } from "effect"
import { readFileSync } from "node:fs"

/** A secret as callers give it: plain, or already `Redacted`. */
export type Secret = string | Redacted.Redacted<string>

/** Authentication and TLS of a connection; all optional (none: no auth, TLS only if the server asks). */
export interface NatsAuthOptions {
  /** Path of a credentials file (`nsc`'s `.creds`: user JWT and seed). `NATS_CREDS`. */
  readonly creds?: string | undefined
  /** An NKey user seed (`SU...`), or the path of a file holding one. `NATS_NKEY_SEED`. */
  readonly nkeySeed?: Secret | undefined
  /** User name (with {@link password}). `NATS_USER`. */
  readonly user?: string | undefined
  /** Password of {@link user}. `NATS_PASSWORD`. */
  readonly password?: Secret | undefined
  /** Authentication token. `NATS_TOKEN`. */
  readonly token?: Secret | undefined
  /** PEM file of the CA(s) that signed the server's certificate. `NATS_TLS_CA`. */
  readonly tlsCa?: string | undefined
  /** PEM file of the client certificate (with {@link tlsKey}). `NATS_TLS_CERT`. */
  readonly tlsCert?: string | undefined
  /** PEM file of the client certificate's private key. `NATS_TLS_KEY`. */
  readonly tlsKey?: string | undefined
}

/** Why the options cannot be used. */
export type NatsAuthErrorCode =
  /** More than one way to authenticate was given. */
  | "Conflict"
  /** Half of a pair: a password without a user, a client certificate without its key or the reverse. */
  | "Incomplete"
  /** A file cannot be read. */
  | "UnreadableFile"
  /** The NKey seed or the credentials file is malformed. */
  | "Invalid"
  /** The server refused the credentials (`Authorization Violation`); not retried at start. */
  | "Rejected"

/** The authentication or TLS options are unusable; the message names the variable and path, never a secret. */
export class NatsAuthError extends Data.TaggedError("NatsAuthError")<{
  readonly code: NatsAuthErrorCode
  readonly message: string
}> {}

/** What nats.js `connect` takes from these options: the servers (without credentials), the authenticator, TLS. */
export interface ConnectOptions {
  readonly servers: Array<string>
  readonly authenticator?: Authenticator
  readonly tls?: NonNullable<NodeConnectionOptions["tls"]>
}

const fail = (code: NatsAuthErrorCode, message: string): Either.Either<never, NatsAuthError> =>
  Either.left(new NatsAuthError({ code, message }))

const reveal = (secret: Secret): string => (Redacted.isRedacted(secret) ? Redacted.value(secret) : secret)

const readFile = (variable: string, path: string): Either.Either<Buffer, NatsAuthError> =>
  Either.try({
    try: () => readFileSync(path),
    catch: (error) =>
      new NatsAuthError({
        code: "UnreadableFile",
        message: `${variable}: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      }),
  })

const decode = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** Server URLs without their credentials, and the credentials (the first URL that has any). */
export const splitServers = (
  servers: ReadonlyArray<string>,
): { readonly servers: ReadonlyArray<string>; readonly user?: string; readonly password?: Redacted.Redacted<string> } => {
  let user: string | undefined
  let password: Redacted.Redacted<string> | undefined
  const clean = servers.map((raw) => {
    const server = raw.trim()
    const match = /^([a-z]+:\/\/)?([^@/]*)@(.*)$/i.exec(server)
    if (match === null) return server
    const [, scheme, info, rest] = match as unknown as [string, string | undefined, string, string]
    if (user === undefined && info !== "") {
      const colon = info.indexOf(":")
      user = decode(colon < 0 ? info : info.slice(0, colon))
      if (colon >= 0) password = Redacted.make(decode(info.slice(colon + 1)))
    }
    return `${scheme ?? ""}${rest}`
  })
  return { servers: clean, ...(user === undefined ? {} : { user }), ...(password === undefined ? {} : { password }) }
}

/** A server list with any credentials in its URLs removed, for messages. */
export const displayServers = (servers: ReadonlyArray<string>): string => splitServers(servers).servers.join(",")

const SEED = /^SU[A-Z2-7]{56}$/

/**
 * The nats.js options for `servers` and `options`: the authenticator, and
 * `tls` when a TLS variable is set or a URL is `tls://`. Reads the files now.
 */
export const resolve = (servers: ReadonlyArray<string>, options: NatsAuthOptions = {}): Either.Either<ConnectOptions, NatsAuthError> =>
  Either.gen(function* () {
    const split = splitServers(servers)
    // a URL's user:password counts as NATS_USER/NATS_PASSWORD, a URL's lone user as NATS_TOKEN
    const fromUrl =
      split.user === undefined ? {} : split.password === undefined ? { token: split.user } : { user: split.user, password: split.password }
    const given = [
      options.creds !== undefined ? "NATS_CREDS" : undefined,
      options.nkeySeed !== undefined ? "NATS_NKEY_SEED" : undefined,
      options.user !== undefined || options.password !== undefined ? "NATS_USER/NATS_PASSWORD" : undefined,
      options.token !== undefined ? "NATS_TOKEN" : undefined,
      split.user !== undefined ? "credentials in NATS_URL" : undefined,
    ].filter((name): name is string => name !== undefined)
    if (given.length > 1) {
      return yield* fail("Conflict", `give one way to authenticate to NATS, not ${given.join(" and ")}`)
    }
    const auth = { ...options, ...fromUrl }
    if (auth.password !== undefined && auth.user === undefined) {
      return yield* fail("Incomplete", "NATS_PASSWORD is set without NATS_USER")
    }
    let authenticator: Authenticator | undefined
    if (auth.creds !== undefined) {
      const creds = yield* readFile("NATS_CREDS", auth.creds)
      const text = creds.toString("utf8")
      if (!/-{3,}[^\n]*JWT[^\n]*-{3,}/.test(text) || !/-{3,}[^\n]*NKEY SEED[^\n]*-{3,}/.test(text)) {
        return yield* fail("Invalid", `NATS_CREDS: ${auth.creds} is not a credentials file (a user JWT and an NKey seed block)`)
      }
      authenticator = credsAuthenticator(new Uint8Array(creds))
    } else if (auth.nkeySeed !== undefined) {
      const value = reveal(auth.nkeySeed).trim()
      // a seed is base32 after its S; anything else is a path (never echo what may be a mistyped seed)
      const isSeed = /^S[A-Z2-7]+$/.test(value)
      const seed = isSeed ? value : (yield* readFile("NATS_NKEY_SEED", value)).toString("utf8").trim()
      const valid = Either.try(() => nkeys.fromSeed(new TextEncoder().encode(seed)).getPublicKey())
      if (!SEED.test(seed) || Either.isLeft(valid)) {
        const what = isSeed ? "the seed" : `the file ${value}`
        return yield* fail("Invalid", `NATS_NKEY_SEED: ${what} is not a valid NKey user seed (SU...)`)
      }
      authenticator = nkeyAuthenticator(() => new TextEncoder().encode(seed))
    } else if (auth.user !== undefined) {
      const password = auth.password
      authenticator = usernamePasswordAuthenticator(auth.user, password === undefined ? undefined : () => reveal(password))
    } else if (auth.token !== undefined) {
      const token = auth.token
      authenticator = tokenAuthenticator(() => reveal(token))
    }

    if ((options.tlsCert === undefined) !== (options.tlsKey === undefined)) {
      return yield* fail(
        "Incomplete",
        options.tlsCert === undefined ? "NATS_TLS_KEY is set without NATS_TLS_CERT" : "NATS_TLS_CERT is set without NATS_TLS_KEY",
      )
    }
    const wantsTls = options.tlsCa !== undefined || options.tlsCert !== undefined || split.servers.some((s) => /^tls:\/\//i.test(s))
    let tls: NonNullable<NodeConnectionOptions["tls"]> | undefined
    if (wantsTls) {
      const ca = options.tlsCa === undefined ? undefined : (yield* readFile("NATS_TLS_CA", options.tlsCa)).toString("utf8")
      const cert = options.tlsCert === undefined ? undefined : (yield* readFile("NATS_TLS_CERT", options.tlsCert)).toString("utf8")
      const key = options.tlsKey === undefined ? undefined : (yield* readFile("NATS_TLS_KEY", options.tlsKey)).toString("utf8")
      // an object, even empty, makes nats.js refuse a server without TLS
      tls = { ...(ca === undefined ? {} : { ca }), ...(cert === undefined ? {} : { cert }), ...(key === undefined ? {} : { key }) }
    }
    return {
      servers: [...split.servers],
      ...(authenticator === undefined ? {} : { authenticator }),
      ...(tls === undefined ? {} : { tls }),
    }
  })

/** A file's path (the page shows it as one). */
const optionalFile = (name: string, description: string) =>
  Config.option(Config.string(name).pipe(Config.withDescription(description), ConfigReference.shownAs("file path"))).pipe(
    Config.map((o) => (Option.isSome(o) && o.value !== "" ? o.value : undefined)),
  )

const optionalString = (name: string, description: string) =>
  Config.option(Config.string(name).pipe(Config.withDescription(description))).pipe(
    Config.map((o) => (Option.isSome(o) && o.value !== "" ? o.value : undefined)),
  )

const optionalSecret = (name: string, description: string) =>
  Config.option(Config.redacted(name).pipe(Config.withDescription(description))).pipe(
    Config.map((o) => (Option.isSome(o) && Redacted.value(o.value) !== "" ? o.value : undefined)),
  )

/** The options from the standard variables (an empty variable counts as unset). */
export const config: Config.Config<NatsAuthOptions> = Config.all({
  creds: optionalFile(
    "NATS_CREDS",
    "NATS credentials file (.creds: user JWT and NKey seed, as nsc writes it). At most one of NATS_CREDS, NATS_NKEY_SEED, NATS_USER, NATS_TOKEN (and credentials in NATS_URL): two stop the start (NatsAuthError Conflict), as does an unreadable file",
  ),
  nkeySeed: optionalSecret("NATS_NKEY_SEED", "NATS NKey user seed (SU...), or the path of a file holding it"),
  user: optionalString(
    "NATS_USER",
    "NATS user name (with NATS_PASSWORD); a server refusing the credentials stops the start (Rejected, not retried)",
  ),
  password: optionalSecret("NATS_PASSWORD", "NATS password of NATS_USER"),
  token: optionalSecret("NATS_TOKEN", "NATS authentication token"),
  tlsCa: optionalFile(
    "NATS_TLS_CA",
    "PEM file of the CA that signed the NATS servers' certificates. Any NATS_TLS_* makes TLS required (as does a tls:// URL); without it the system CAs verify the server",
  ),
  tlsCert: optionalFile("NATS_TLS_CERT", "PEM file of the NATS client certificate (with NATS_TLS_KEY: both or neither)"),
  tlsKey: optionalFile("NATS_TLS_KEY", "PEM file of the NATS client certificate's key (with NATS_TLS_CERT)"),
})
