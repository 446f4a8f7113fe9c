// NATS authentication and TLS: the options from the standard variables, their
// validation (coded errors that name the variable and path, never a secret),
// and real connections to private nats-servers requiring a user and password,
// an NKey, a token, or TLS with a client certificate.
import { NatsServer } from "@ctxd/testing"
import { nkeys } from "@nats-io/transport-node"
import { ConfigProvider, Effect, Either, Exit, Redacted } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NatsAuth, NatsClient } from "../src/index.ts"

const PASSWORD = "pw-5b1e2f0c9d8a7e6f"
const TOKEN = "tok-0a9b8c7d6e5f4a3b"
const SERVERS = ["nats://127.0.0.1:4222"]

const fromEnv = (env: Record<string, string>) =>
  Effect.runSync(NatsAuth.config.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))

const failure = (either: Either.Either<unknown, NatsAuth.NatsAuthError>): NatsAuth.NatsAuthError => {
  if (Either.isRight(either)) throw new Error("expected a NatsAuthError")
  return either.left
}

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "ctxd-nats-auth-"))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("NatsAuth options", () => {
  it("reads the standard variables, secrets redacted, empty ones unset", () => {
    const options = fromEnv({ NATS_USER: "ctxd", NATS_PASSWORD: PASSWORD, NATS_TOKEN: "", NATS_TLS_CA: "/ca.pem" })
    expect(options.user).toBe("ctxd")
    expect(options.token).toBeUndefined()
    expect(options.tlsCa).toBe("/ca.pem")
    expect(Redacted.isRedacted(options.password)).toBe(true)
    expect(JSON.stringify(options)).not.toContain(PASSWORD)
    expect(String(options.password)).not.toContain(PASSWORD)
  })

  it("no options: no authenticator, TLS only if the server asks", () => {
    const resolved = Either.getOrThrow(NatsAuth.resolve(SERVERS))
    expect(resolved).toEqual({ servers: SERVERS })
  })

  it("refuses two ways to authenticate, naming the variables and not the secrets", () => {
    const error = failure(NatsAuth.resolve(SERVERS, fromEnv({ NATS_CREDS: "/x.creds", NATS_TOKEN: TOKEN })))
    expect(error.code).toBe("Conflict")
    expect(error.message).toContain("NATS_CREDS and NATS_TOKEN")
    expect(error.message).not.toContain(TOKEN)
    const url = failure(NatsAuth.resolve([`nats://u:${PASSWORD}@127.0.0.1:4222`], { token: TOKEN }))
    expect(url.code).toBe("Conflict")
    expect(url.message).toContain("credentials in NATS_URL")
    expect(url.message).not.toContain(PASSWORD)
  })

  it("refuses half a pair", () => {
    expect(failure(NatsAuth.resolve(SERVERS, { password: PASSWORD })).code).toBe("Incomplete")
    const cert = failure(NatsAuth.resolve(SERVERS, { tlsCert: "/c.pem" }))
    expect(cert).toMatchObject({ code: "Incomplete", message: "NATS_TLS_CERT is set without NATS_TLS_KEY" })
  })

  it("a missing file names the variable and the path", () => {
    const path = join(dir, "missing.creds")
    const error = failure(NatsAuth.resolve(SERVERS, { creds: path }))
    expect(error).toMatchObject({ code: "UnreadableFile", message: `NATS_CREDS: cannot read ${path}: ENOENT` })
    const ca = failure(NatsAuth.resolve(SERVERS, { tlsCa: join(dir, "nope.pem") }))
    expect(ca.message).toBe(`NATS_TLS_CA: cannot read ${join(dir, "nope.pem")}: ENOENT`)
  })

  it("a malformed seed or credentials file is Invalid, and the seed is not shown", () => {
    const seed = new TextDecoder().decode(nkeys.createUser().getSeed())
    // A middle character: the last one carries padding bits a decoder may ignore,
    // so changing it does not always change the key (the CRC catches any 5-bit change).
    const broken = `${seed.slice(0, 20)}${seed[20] === "A" ? "B" : "A"}${seed.slice(21)}`
    const error = failure(NatsAuth.resolve(SERVERS, { nkeySeed: Redacted.make(broken) }))
    expect(error.code).toBe("Invalid")
    expect(error.message).not.toContain(broken)
    const file = join(dir, "bad.creds")
    writeFileSync(file, `not a creds file ${seed}`)
    const creds = failure(NatsAuth.resolve(SERVERS, { creds: file }))
    expect(creds.code).toBe("Invalid")
    expect(creds.message).toContain(file)
    expect(creds.message).not.toContain(seed)
  })

  it("takes credentials out of the URLs", () => {
    const resolved = Either.getOrThrow(
      NatsAuth.resolve([`nats://ctxd:${encodeURIComponent("p@ss:w/rd")}@127.0.0.1:4222`, "nats://127.0.0.1:4223"]),
    )
    expect(resolved.servers).toEqual(["nats://127.0.0.1:4222", "nats://127.0.0.1:4223"])
    expect(resolved.authenticator).toBeTypeOf("function")
    const split = NatsAuth.splitServers([`nats://ctxd:${encodeURIComponent("p@ss:w/rd")}@h:1`])
    expect(split.user).toBe("ctxd")
    expect(Redacted.value(split.password!)).toBe("p@ss:w/rd")
    expect(NatsAuth.displayServers([`tls://${TOKEN}@h:1`, "nats://h:2"])).toBe("tls://h:1,nats://h:2")
  })

  it("a tls:// URL requires TLS", () => {
    expect(Either.getOrThrow(NatsAuth.resolve(["tls://127.0.0.1:4222"])).tls).toEqual({})
  })
})

/** A signed NATS JWT (v2, `ed25519-nkey`) of `nats` claims about `subject`, issued by `issuer`. */
const jwt = (issuer: nkeys.KeyPair, subject: string, nats: Record<string, unknown>): string => {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")
  const claims = {
    jti: Buffer.from(nkeys.createUser().getPublicKey()).toString("hex").slice(0, 52).toUpperCase(),
    iat: Math.floor(Date.now() / 1000),
    iss: issuer.getPublicKey(),
    name: subject.slice(0, 8),
    sub: subject,
    nats: { ...nats, version: 2 },
  }
  const signed = `${encode({ typ: "JWT", alg: "ed25519-nkey" })}.${encode(claims)}`
  return `${signed}.${Buffer.from(issuer.sign(new TextEncoder().encode(signed))).toString("base64url")}`
}

/** An operator, an account and a user: the server's config (operator mode, memory resolver) and the user's creds file text. */
const operatorSetup = () => {
  const operator = nkeys.createOperator()
  const account = nkeys.createAccount()
  const user = nkeys.createUser()
  const unlimited = { subs: -1, data: -1, payload: -1 }
  const operatorJwt = jwt(operator, operator.getPublicKey(), { type: "operator" })
  const accountJwt = jwt(operator, account.getPublicKey(), {
    type: "account",
    limits: { ...unlimited, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 },
  })
  const userJwt = jwt(account, user.getPublicKey(), { type: "user", pub: {}, sub: {}, ...unlimited })
  const seed = new TextDecoder().decode(user.getSeed())
  return {
    config: `operator: ${JSON.stringify(operatorJwt)}\nresolver: MEMORY\nresolver_preload: { ${account.getPublicKey()}: ${JSON.stringify(accountJwt)} }`,
    creds:
      `-----BEGIN NATS USER JWT-----\n${userJwt}\n------END NATS USER JWT------\n\n` +
      `************************* IMPORTANT *************************\n` +
      `NKEY Seed printed below can be used to sign and prove identity.\n\n` +
      `-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`,
    seed,
  }
}

/** Connects with `options`, checks the connection with a round trip, and closes it. */
const roundTrip = (options: NatsClient.NatsClientOptions) =>
  Effect.runPromiseExit(
    Effect.scoped(
      Effect.gen(function* () {
        const { connection } = yield* NatsClient.make({ connectTimeoutMs: 3_000, ...options })
        const sub = connection.subscribe("auth.echo", { callback: (_, msg) => void msg.respond(msg.data) })
        const reply = yield* Effect.promise(() => connection.request("auth.echo", "ping", { timeout: 2_000 }))
        sub.unsubscribe()
        return reply.string()
      }),
    ),
  )

const rejected = (exit: Exit.Exit<unknown, unknown>, secret: string): NatsAuth.NatsAuthError => {
  if (Exit.isSuccess(exit)) throw new Error("expected the connection to fail")
  const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  expect(String(exit.cause)).not.toContain(secret)
  expect(error).toBeInstanceOf(NatsAuth.NatsAuthError)
  return error as NatsAuth.NatsAuthError
}

describe.skipIf(!NatsServer.available())("NatsAuth against a private nats-server", () => {
  const user = nkeys.createUser()
  const seed = new TextDecoder().decode(user.getSeed())
  let users: NatsServer.NatsServer
  let token: NatsServer.NatsServer
  let tls: NatsServer.NatsServer
  let operatorMode: NatsServer.NatsServer
  let pki: NatsServer.Pki
  const operator = operatorSetup()
  beforeAll(async () => {
    pki = NatsServer.makePki(dir)
    users = await NatsServer.start(
      `authorization { users: [ {user: ctxd, password: ${JSON.stringify(PASSWORD)}}, {nkey: ${user.getPublicKey()}} ] }`,
      { jetstream: false },
    )
    token = await NatsServer.start(`authorization { token: ${JSON.stringify(TOKEN)} }`, { jetstream: false })
    tls = await NatsServer.start(`${NatsServer.tlsBlock(pki)}\nauthorization { user: ctxd, password: ${JSON.stringify(PASSWORD)} }`, {
      jetstream: false,
    })
    operatorMode = await NatsServer.start(operator.config, { jetstream: false })
  }, 30_000)
  afterAll(async () => {
    await Promise.all([users?.stop(), token?.stop(), tls?.stop(), operatorMode?.stop()])
  })
  const url = (server: NatsServer.NatsServer, scheme = "nats") => `${scheme}://127.0.0.1:${server.port}`

  it("user and password, from the options or the URL", async () => {
    expect(await roundTrip({ servers: [url(users)], auth: { user: "ctxd", password: Redacted.make(PASSWORD) } })).toEqual(
      Exit.succeed("ping"),
    )
    expect(await roundTrip({ servers: [`nats://ctxd:${PASSWORD}@127.0.0.1:${users.port}`] })).toEqual(Exit.succeed("ping"))
  })

  it("a wrong password is Rejected, without the password in the error", async () => {
    const wrong = `${PASSWORD}-wrong`
    const error = rejected(await roundTrip({ servers: [url(users)], auth: { user: "ctxd", password: wrong } }), wrong)
    expect(error.code).toBe("Rejected")
    expect(error.message).toContain("Authorization Violation")
    const inUrl = rejected(await roundTrip({ servers: [`nats://ctxd:${wrong}@127.0.0.1:${users.port}`] }), wrong)
    expect(inUrl.message).toContain(`nats://127.0.0.1:${users.port}`)
    // no credentials at all
    expect(rejected(await roundTrip({ servers: [url(users)] }), PASSWORD).code).toBe("Rejected")
  })

  it("an NKey seed, given or in a file", async () => {
    expect(await roundTrip({ servers: [url(users)], auth: { nkeySeed: Redacted.make(seed) } })).toEqual(Exit.succeed("ping"))
    const file = join(dir, "user.nk")
    writeFileSync(file, `${seed}\n`)
    expect(await roundTrip({ servers: [url(users)], auth: fromEnv({ NATS_NKEY_SEED: file }) })).toEqual(Exit.succeed("ping"))
    const stranger = new TextDecoder().decode(nkeys.createUser().getSeed())
    expect(rejected(await roundTrip({ servers: [url(users)], auth: { nkeySeed: stranger } }), stranger).code).toBe("Rejected")
  })

  it("a credentials file (user JWT and seed, operator mode)", async () => {
    const file = join(dir, "user.creds")
    writeFileSync(file, operator.creds)
    expect(await roundTrip({ servers: [url(operatorMode)], auth: fromEnv({ NATS_CREDS: file }) })).toEqual(Exit.succeed("ping"))
    // a user the account never signed
    const stranger = operatorSetup()
    const other = join(dir, "stranger.creds")
    writeFileSync(other, stranger.creds)
    expect(rejected(await roundTrip({ servers: [url(operatorMode)], auth: { creds: other } }), stranger.seed).code).toBe("Rejected")
  })

  it("a token", async () => {
    expect(await roundTrip({ servers: [url(token)], auth: fromEnv({ NATS_TOKEN: TOKEN }) })).toEqual(Exit.succeed("ping"))
    expect(rejected(await roundTrip({ servers: [url(token)], auth: { token: "not-it" } }), "not-it").code).toBe("Rejected")
  })

  it("TLS with a CA and a client certificate", async () => {
    const auth = fromEnv({
      NATS_USER: "ctxd",
      NATS_PASSWORD: PASSWORD,
      NATS_TLS_CA: pki.ca,
      NATS_TLS_CERT: pki.clientCert,
      NATS_TLS_KEY: pki.clientKey,
    })
    expect(await roundTrip({ servers: [url(tls, "tls")], auth })).toEqual(Exit.succeed("ping"))
    // the server's certificate is not trusted without its CA
    const untrusted = await roundTrip({ servers: [url(tls, "tls")], auth: { ...auth, tlsCa: pki.otherCa } })
    expect(Exit.isFailure(untrusted)).toBe(true)
    expect(String(Exit.isFailure(untrusted) ? untrusted.cause : "")).not.toContain(PASSWORD)
    // the server requires a client certificate
    const { tlsCert: _c, tlsKey: _k, ...noClientCert } = auth
    expect(Exit.isFailure(await roundTrip({ servers: [url(tls, "tls")], auth: noClientCert }))).toBe(true)
  })

  it("a tls:// URL refuses a server without TLS", async () => {
    const exit = await roundTrip({ servers: [url(users, "tls")], auth: { user: "ctxd", password: PASSWORD } })
    expect(Exit.isFailure(exit)).toBe(true)
    expect(String(Exit.isFailure(exit) ? exit.cause : "")).not.toContain(PASSWORD)
  })
})
