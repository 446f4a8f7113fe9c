/**
 * A scriptable upstream for what the fake provider does not do on demand:
 * holding a stream open between events, compressing a response, Responses
 * and Gemini event streams. Each test sets `handler`.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

export interface Scripted {
  readonly url: string
  handler: (req: Http.IncomingMessage, body: Buffer, res: Http.ServerResponse) => void
  /** What the upstream received, oldest first. */
  readonly seen: Array<{ readonly method: string; readonly url: string; readonly headers: Http.IncomingHttpHeaders; readonly body: Buffer }>
  readonly close: () => Promise<void>
}

export const scripted = async (): Promise<Scripted> => {
  const s: Scripted = {
    url: "",
    seen: [],
    handler: (_req, _body, res) => {
      res.writeHead(500)
      res.end()
    },
    close: () => Promise.resolve(),
  }
  const server = Http.createServer((req, res) => {
    const parts: Array<Buffer> = []
    req.on("data", (c: Buffer) => parts.push(c))
    req.on("end", () => {
      const body = Buffer.concat(parts)
      s.seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body })
      s.handler(req, body, res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return Object.assign(s, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  })
}

/** One server-sent event. */
export const sse = (event: string | undefined, data: unknown): string =>
  `${event === undefined ? "" : `event: ${event}\n`}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`
