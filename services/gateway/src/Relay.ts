/**
 * One upstream call and its response relayed to the client: the request
 * goes out once (the gateway never retries a model call: a client that
 * meets a 429 or 529 retries on its own, after the `retry-after` it was
 * relayed), the status and headers come back as the provider sent them
 * (hop-by-hop ones dropped), and the body is piped chunk by chunk — each
 * chunk is written to the client as it arrives, with backpressure (a slow
 * client pauses the upstream socket rather than filling memory), and a copy
 * goes to the usage tap.
 */
import * as Http from "node:http"
import * as Https from "node:https"
import { Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as ErrorBody from "./ErrorBody.ts"
import * as HeaderPolicy from "./HeaderPolicy.ts"
import * as Metrics from "./Metrics.ts"
import type { Provider } from "./Options.ts"
import type { Api } from "./Port.ts"
import * as UsageTap from "./UsageTap.ts"

/** The keep-alive agents upstream calls go through (one pair per server). */
export interface Agents {
  readonly http: Http.Agent
  readonly https: Https.Agent
}

export const agents = (): Agents => ({
  http: new Http.Agent({ keepAlive: true, maxFreeSockets: 64 }),
  https: new Https.Agent({ keepAlive: true, maxFreeSockets: 64 }),
})

export interface Call {
  readonly agents: Agents
  readonly url: URL
  readonly method: string
  readonly headers: Http.OutgoingHttpHeaders
  /** The whole body (turn routes), or the client's request streamed through (pass-through). */
  readonly body: Buffer | Http.IncomingMessage
  readonly provider: Provider
  /** The route label, for metrics. */
  readonly label: string
  /** Read the usage of a 2xx response of this API, at most `limit` decoded bytes of a JSON one. */
  readonly tap?: { readonly api: Api; readonly limit: number } | undefined
  /** Epoch ms (performance clock) the client's request arrived. */
  readonly arrived: number
  /** Called when the upstream request has been sent (headers and body handed to the socket). */
  readonly onSent?: (() => void) | undefined
}

export interface Result {
  readonly outcome: Metrics.Outcome
  readonly status: number | undefined
  /** The usage read from a 2xx response (when tapped). */
  readonly read: UsageTap.Read | undefined
  readonly tapped: boolean
}

const outcomeOf = (status: number): Metrics.Outcome => (status >= 500 ? "upstream_5xx" : status >= 400 ? "upstream_4xx" : "ok")

const headerText = (value: string | ReadonlyArray<string> | undefined): string => (typeof value === "string" ? value : (value?.[0] ?? ""))

/** Sends `call` upstream and relays the answer into `res`; resolves when the exchange is over (never rejects). */
export const call = (c: Call, res: Http.ServerResponse): Promise<Result> =>
  new Promise<Result>((resolve) => {
    let settled = false
    const done = (result: Result) => {
      if (settled) return
      settled = true
      resolve(result)
    }
    const client = c.url.protocol === "https:" ? Https : Http
    const headers = { ...c.headers }
    if (Buffer.isBuffer(c.body)) headers["content-length"] = c.body.length
    else if (c.body.headers["content-length"] !== undefined) headers["content-length"] = c.body.headers["content-length"]
    const upstream = client.request(c.url, {
      method: c.method,
      headers,
      agent: c.url.protocol === "https:" ? c.agents.https : c.agents.http,
    })
    const sentAt = { value: performance.now() }
    // set when the upstream broke off its response: the client's connection is then cut by us, not gone by itself
    let cut = false
    const gone = () => {
      if (res.writableFinished) return
      upstream.destroy()
      done({ outcome: cut ? "upstream_cut" : "client_gone", status: undefined, read: undefined, tapped: false })
    }
    res.once("close", gone)
    upstream.on("error", () => {
      // the upstream could not be reached, or dropped the connection before its headers
      if (res.headersSent) {
        res.destroy()
        return done({ outcome: "upstream_unreachable", status: undefined, read: undefined, tapped: false })
      }
      ErrorBody.send(res, c.provider, 502, "ctxd gateway: the upstream provider could not be reached")
      done({ outcome: "upstream_unreachable", status: 502, read: undefined, tapped: false })
    })
    upstream.once("response", (answer) => {
      Metrics.upstreamLatency(c.label, performance.now() - sentAt.value)
      const status = answer.statusCode ?? 502
      answer.once("aborted", () => (cut = true))
      answer.once("error", () => (cut = true))
      const tap =
        c.tap !== undefined && status >= 200 && status < 300
          ? UsageTap.make(
              c.tap.api,
              headerText(answer.headers["content-type"]),
              headerText(answer.headers["content-encoding"]),
              c.tap.limit,
            )
          : undefined
      res.writeHead(status, answer.statusMessage, HeaderPolicy.downstream(answer.headers))
      // an event stream is flushed as it comes: headers now, each chunk on arrival
      res.flushHeaders()
      let first = true
      let bytes = 0
      const through = new Transform({
        transform(chunk: Buffer, _encoding, next) {
          if (first) {
            first = false
            Metrics.timeToFirstByte(c.label, performance.now() - c.arrived)
          }
          bytes += chunk.length
          tap?.write(chunk)
          next(null, chunk)
        },
      })
      pipeline(answer, through, res).then(
        async () => {
          Metrics.relayed(c.label, bytes)
          const read = tap === undefined ? undefined : await tap.end()
          done({ outcome: outcomeOf(status), status, read, tapped: tap !== undefined })
        },
        () => {
          Metrics.relayed(c.label, bytes)
          // the client left mid-response, or the upstream cut it: either way the exchange is over
          const outcome = res.writableFinished ? outcomeOf(status) : cut ? "upstream_cut" : "client_gone"
          done({ outcome, status, read: undefined, tapped: false })
        },
      )
    })
    if (Buffer.isBuffer(c.body)) {
      upstream.end(c.body, () => {
        sentAt.value = performance.now()
        c.onSent?.()
      })
    } else {
      c.onSent?.()
      pipeline(c.body, upstream).catch(() => upstream.destroy())
    }
  })
