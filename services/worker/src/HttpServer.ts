/**
 * The worker's HTTP port (`CTXD_HTTP_HOST`:`CTXD_HTTP_PORT`, default
 * `0.0.0.0:9464`; port 0: no server at all), for the platform around it:
 *
 * - `GET /metrics`: every Effect metric in the Prometheus text format
 *   (`Telemetry.Scrape`), the runtime gauges refreshed first;
 * - `GET /healthz`: 200 `{"ok": true, ...}` while the process runs;
 * - `GET /readyz`: 200 when every readiness check passes and the worker is
 *   not draining, else 503; the body lists each check (`WorkerStatus`);
 * - anything else: 404 (405 for a method other than GET and HEAD).
 *
 * Bounded: no request body is read; at most {@link defaults.maxConnections}
 * connections, {@link defaults.maxHeaders} headers, a request must arrive
 * within {@link defaults.requestTimeoutMs}, and each answer is computed
 * within {@link defaults.answerTimeoutMs} (503 past it). The server is a
 * scoped resource: closing the scope stops accepting, ends idle keep-alive
 * connections, and after {@link defaults.closeTimeoutMs} the rest.
 */
import { Data, Duration, Effect, FiberSet, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { Scrape } from "./Telemetry.ts"
import { WorkerStatus } from "./WorkerStatus.ts"

/** The HTTP port's defaults and bounds. */
export const defaults = {
  /** `CTXD_HTTP_PORT`: the Prometheus exporter's registered port. 0 turns the server off. */
  port: 9464,
  /** `CTXD_HTTP_HOST`: every interface. */
  host: "0.0.0.0",
  /** Connections at once; more are refused by the kernel backlog / closed. */
  maxConnections: 64,
  /** Headers per request. */
  maxHeaders: 64,
  /** A whole request (headers) must arrive within this. */
  requestTimeoutMs: 5_000,
  /** Idle keep-alive connections are closed after this. */
  keepAliveTimeoutMs: 5_000,
  /** An answer (a scrape, a readiness report) must be ready within this, else 503. */
  answerTimeoutMs: 5_000,
  /** How long closing may wait for open connections before it cuts them. */
  closeTimeoutMs: 2_000,
} as const

/** The port could not be opened (in use, not permitted, bad address). */
export class HttpServerError extends Data.TaggedError("HttpServerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Where to listen and what to say. */
export interface Options {
  readonly host: string
  /** 1..65535 (0 is "off": do not call {@link make}). */
  readonly port: number
  /** Shown by `/healthz`. */
  readonly workerId: string
}

/** A running server. */
export interface HttpServer {
  /** The bound address and port. */
  readonly address: { readonly host: string; readonly port: number }
}

type Answer = { readonly status: number; readonly type: string; readonly body: string; readonly headers?: Record<string, string> }

const json = (status: number, value: unknown): Answer => ({ status, type: "application/json; charset=utf-8", body: JSON.stringify(value) })

const write = (req: IncomingMessage, res: ServerResponse, answer: Answer): void => {
  if (res.headersSent || res.destroyed) return
  const body = Buffer.from(answer.body, "utf8")
  res.writeHead(answer.status, {
    "content-type": answer.type,
    "content-length": String(body.length),
    "cache-control": "no-store",
    ...answer.headers,
  })
  res.end(req.method === "HEAD" ? undefined : body)
}

/** Listens until the scope closes. */
export const make = (options: Options): Effect.Effect<HttpServer, HttpServerError, Scope.Scope | WorkerStatus | Scrape> =>
  Effect.gen(function* () {
    const status = yield* WorkerStatus
    const scrape = yield* Scrape
    const started = Date.now()
    const fibers = yield* FiberSet.make<void, never>()
    const run = yield* FiberSet.runtime(fibers)<never>()
    const timeout = Duration.millis(defaults.answerTimeoutMs)

    const answer = (path: string): Effect.Effect<Answer> => {
      switch (path) {
        case "/healthz":
          return Effect.succeed(
            json(200, { ok: true, worker: options.workerId, uptimeMs: Date.now() - started, draining: status.draining() }),
          )
        case "/readyz":
          return Effect.map(status.report, (report) =>
            json(report.ready ? 200 : 503, { ok: report.ready, worker: options.workerId, ...report }),
          )
        case "/metrics":
          return Effect.zipRight(status.refreshGauges, scrape.text).pipe(
            Effect.map((text): Answer => ({ status: 200, type: "text/plain; version=0.0.4; charset=utf-8", body: text })),
            Effect.catchAll((error) =>
              Effect.as(Effect.logWarning(`metrics scrape failed: ${error.message}`), json(500, { ok: false, error: "scrape failed" })),
            ),
          )
        default:
          return Effect.succeed(json(404, { ok: false, error: "not found", paths: ["/metrics", "/healthz", "/readyz"] }))
      }
    }

    const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
      if (req.method !== "GET" && req.method !== "HEAD") {
        return write(req, res, {
          ...json(405, { ok: false, error: "method not allowed" }),
          headers: { allow: "GET, HEAD", connection: "close" },
        })
      }
      const url = req.url ?? "/"
      const at = url.indexOf("?")
      const path = at < 0 ? url : url.slice(0, at)
      run(
        answer(path).pipe(
          Effect.timeoutTo({ duration: timeout, onSuccess: (a) => a, onTimeout: () => json(503, { ok: false, error: "timed out" }) }),
          Effect.catchAllCause(() => Effect.succeed(json(500, { ok: false, error: "internal" }))),
          Effect.flatMap((a) => Effect.sync(() => write(req, res, a))),
          Effect.onInterrupt(() => Effect.sync(() => write(req, res, json(503, { ok: false, error: "shutting down" })))),
        ),
      )
    }

    const server = createServer(
      {
        requestTimeout: defaults.requestTimeoutMs,
        headersTimeout: defaults.requestTimeoutMs,
        keepAliveTimeout: defaults.keepAliveTimeoutMs,
        maxHeaderSize: 16 * 1024,
      },
      onRequest,
    )
    server.maxConnections = defaults.maxConnections
    server.maxHeadersCount = defaults.maxHeaders
    server.on("clientError", (_error, socket) => {
      if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
      else socket.destroy()
    })

    const address = yield* Effect.acquireRelease(
      Effect.async<{ host: string; port: number }, HttpServerError>((resume) => {
        const onError = (cause: Error) =>
          resume(
            Effect.fail(
              new HttpServerError({
                message: `cannot listen on ${options.host}:${options.port}: ${cause.message} (set CTXD_HTTP_PORT to a free port, or 0 for no HTTP server)`,
                cause,
              }),
            ),
          )
        server.once("error", onError)
        server.listen(options.port, options.host, () => {
          server.off("error", onError)
          server.on("error", (e) => run(Effect.logWarning(`http server error: ${e.message}`)))
          const bound = server.address()
          resume(
            Effect.succeed(
              typeof bound === "object" && bound !== null
                ? { host: bound.address, port: bound.port }
                : { host: options.host, port: options.port },
            ),
          )
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeIdleConnections()
        }).pipe(
          Effect.interruptible,
          Effect.timeout(Duration.millis(defaults.closeTimeoutMs)),
          Effect.catchAll(() => Effect.sync(() => server.closeAllConnections())),
          Effect.ensuring(Effect.sync(() => server.closeAllConnections())),
        ),
    )
    yield* Effect.logInfo(`http server on ${address.host}:${address.port}: /metrics, /healthz, /readyz`)
    return { address }
  })
