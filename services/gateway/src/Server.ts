/**
 * The gateway's HTTP server (`node:http`): the providers' APIs (see
 * `Proxy.ts`, `Routes.ts`) and three paths of its own for the platform:
 *
 * - `GET /healthz`: 200 `{"ok": true}` while the process runs;
 * - `GET /readyz`: 200 when `turns.ready()` says the fleet can answer, else
 *   503 (a gateway that fails open still serves, but a balancer should
 *   prefer one that is ready);
 * - `GET /metrics`: Prometheus text (`options.scrape`, else `Metrics.exposition`).
 *
 * No provider API has these paths. Bounded: request headers must arrive
 * within {@link limits.headersTimeoutMs}; bodies of turn routes are bounded
 * by `maxBodyBytes`; responses are piped with backpressure. `close()` stops
 * accepting, lets running requests finish for {@link limits.closeGraceMs},
 * then cuts what is left (long streams included) and closes the port.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as ErrorBody from "./ErrorBody.ts"
import * as Metrics from "./Metrics.ts"
import { resolve, type ServerOptions } from "./Options.ts"
import * as Proxy from "./Proxy.ts"
import * as Relay from "./Relay.ts"
import * as Routes from "./Routes.ts"

/** The server's fixed bounds. */
export const limits = {
  /** A request's headers must arrive within this. */
  headersTimeoutMs: 30_000,
  /** Idle keep-alive connections from clients are closed after this. */
  keepAliveTimeoutMs: 65_000,
  /** Largest request header block. */
  maxHeaderBytes: 64 * 1024,
  /** How long `close()` waits for running requests before cutting them. */
  closeGraceMs: 5_000,
  /** How long `/readyz` waits for the port's answer. */
  readyTimeoutMs: 2_000,
} as const

/** A running gateway. */
export interface GatewayServer {
  /** `http://<host>:<port>`: the base URL clients are pointed at (the OpenAI SDK's is `url + "/v1"`). */
  readonly url: string
  readonly host: string
  readonly port: number
  /** Stops the server (idempotent); does not close the port to the fleet (its owner does). */
  readonly close: () => Promise<void>
}

const json = (res: Http.ServerResponse, status: number, value: unknown, head: boolean): void => {
  const text = JSON.stringify(value)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" })
  res.end(head ? undefined : text)
}

const withTimeout = <A>(promise: Promise<A>, ms: number, fallback: A): Promise<A> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(fallback), ms)
    promise.then(
      (a) => {
        clearTimeout(timer)
        resolve(a)
      },
      () => {
        clearTimeout(timer)
        resolve(fallback)
      },
    )
  })

/**
 * Starts the gateway (see {@link ServerOptions}; only `turns` is required).
 * Rejects when the port cannot be bound or an option cannot work.
 */
export const startServer = async (options: ServerOptions): Promise<GatewayServer> => {
  const o = resolve(options)
  const agents = Relay.agents()

  const own = async (req: Http.IncomingMessage, res: Http.ServerResponse, path: string): Promise<boolean> => {
    if (req.method !== "GET" && req.method !== "HEAD") return false
    const head = req.method === "HEAD"
    if (path === "/healthz") {
      json(res, 200, { ok: true }, head)
      return true
    }
    if (path === "/readyz") {
      const ready = await withTimeout(
        Promise.resolve().then(() => o.turns.ready()),
        limits.readyTimeoutMs,
        false,
      )
      json(res, ready ? 200 : 503, { ok: ready }, head)
      return true
    }
    if (path === "/metrics") {
      const text = await (o.scrape ?? (() => Promise.resolve(Metrics.exposition())))().catch(() => undefined)
      if (text === undefined) json(res, 500, { ok: false, error: "scrape failed" }, head)
      else {
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" })
        res.end(head ? undefined : text)
      }
      return true
    }
    return false
  }

  const server = Http.createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      // a streamed answer may take minutes: no whole-request timeout
      requestTimeout: 0,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
    },
    (req, res) => {
      res.on("error", () => {})
      req.on("error", () => {})
      const path = (req.url ?? "/").split("?", 1)[0]!
      own(req, res, path)
        .then((answered) => (answered ? undefined : Proxy.handle(o, agents, req, res)))
        .catch((e: unknown) => {
          o.logger.error({ path, error: e instanceof Error ? e.name : "unknown" }, "gateway internal error")
          if (res.headersSent || res.destroyed) return void res.destroy()
          // in the words of the API the client called, so its SDK raises its usual error
          const provider = Routes.route(req.method ?? "GET", path, req.headers, new URLSearchParams()).provider
          ErrorBody.send(res, provider, 500, "ctxd gateway: internal error")
        })
    },
  )
  server.on("clientError", (_error, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
    else socket.destroy()
  })

  await new Promise<void>((resolvePromise, reject) => {
    server.once("error", reject)
    server.listen(o.port, o.host, () => {
      server.off("error", reject)
      resolvePromise()
    })
  })
  const address = server.address() as AddressInfo
  const host = address.address.includes(":") ? `[${address.address}]` : address.address
  let closing: Promise<void> | undefined
  const close = () =>
    (closing ??= new Promise<void>((done) => {
      const cut = setTimeout(() => server.closeAllConnections(), limits.closeGraceMs)
      server.close(() => {
        clearTimeout(cut)
        agents.http.destroy()
        agents.https.destroy()
        done()
      })
      server.closeIdleConnections()
    }))
  o.logger.info({ host: address.address, port: address.port }, "gateway listening")
  return { url: `http://${host}:${address.port}`, host: address.address, port: address.port, close }
}
