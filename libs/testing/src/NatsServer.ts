/**
 * A private `nats-server` for tests that need a server configured their own
 * way (authentication, TLS), on a free port, with its own JetStream store,
 * stopped with the test; and a throwaway TLS PKI made with `openssl` (a CA, a
 * server certificate for 127.0.0.1 and localhost, a client certificate).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { connect as connectTcp, createServer, type AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Where the server binary is expected. */
export const BINARY = "/usr/sbin/nats-server"

/** True when both `nats-server` and `openssl` can be run here. */
export const available = (): boolean => {
  if (!existsSync(BINARY)) return false
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/** A free TCP port on 127.0.0.1 (free when asked; a test starts its server at once). */
export const freePort = (): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

export interface NatsServer {
  readonly port: number
  /** The server's directory (config, JetStream store); removed by {@link NatsServer.stop}. */
  readonly dir: string
  /** Everything the server wrote so far. */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

const listening = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connectTcp(port, "127.0.0.1")
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
  })

/**
 * Starts `nats-server -c <config>` where `config` is the body of a config
 * file without `listen` and `jetstream` (added here: 127.0.0.1 on a free
 * port, and, unless `jetstream: false`, JetStream in the server's
 * directory); resolves once it accepts connections.
 */
export const start = async (config: string, options: { readonly dir?: string; readonly jetstream?: boolean } = {}): Promise<NatsServer> => {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "ctxd-nats-"))
  const port = await freePort()
  const file = join(dir, "nats.conf")
  const jetstream = options.jetstream === false ? "" : `jetstream { store_dir: ${JSON.stringify(join(dir, "js"))} }\n`
  writeFileSync(file, `listen: "127.0.0.1:${port}"\n${jetstream}${config}\n`)
  const child: ChildProcess = spawn(BINARY, ["-c", file], { stdio: ["ignore", "pipe", "pipe"] })
  let text = ""
  child.stdout?.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
  const deadline = Date.now() + 10_000
  while (!(await listening(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop()
      throw new Error(`nats-server did not start:\n${text}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { port, dir, output: () => text, stop }
}

/** PEM files of a throwaway PKI. */
export interface Pki {
  readonly ca: string
  readonly serverCert: string
  readonly serverKey: string
  readonly clientCert: string
  readonly clientKey: string
  /** A CA that signed nothing here: a server verified with it is not trusted. */
  readonly otherCa: string
}

const openssl = (dir: string, args: ReadonlyArray<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })

/** Makes a CA, a server certificate (127.0.0.1, localhost) and a client certificate in `dir` (EC P-256, one day). */
export const makePki = (dir: string): Pki => {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  for (const ca of ["ca", "other-ca"]) {
    openssl(dir, ["req", "-x509", ...ec, "-keyout", `${ca}.key`, "-out", `${ca}.pem`, "-days", "1", "-subj", `/CN=ctxd test ${ca}`])
  }
  const leaf = (name: string, ext: string) => {
    writeFileSync(join(dir, `${name}.ext`), ext)
    openssl(dir, ["req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=ctxd test ${name}`])
    openssl(dir, [
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    ])
  }
  leaf("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
  leaf("client", "extendedKeyUsage=clientAuth\n")
  const at = (file: string) => join(dir, file)
  return {
    ca: at("ca.pem"),
    serverCert: at("server.pem"),
    serverKey: at("server.key"),
    clientCert: at("client.pem"),
    clientKey: at("client.key"),
    otherCa: at("other-ca.pem"),
  }
}

/** A `tls {}` block requiring client certificates signed by the PKI's CA. */
export const tlsBlock = (pki: Pki): string =>
  `tls { cert_file: ${JSON.stringify(pki.serverCert)}, key_file: ${JSON.stringify(pki.serverKey)}, ` +
  `ca_file: ${JSON.stringify(pki.ca)}, verify: true, timeout: 5 }`
