/**
 * Helpers of the observability tests (`observe.test.ts`): a local OTLP/HTTP
 * receiver, a TCP proxy that can be cut (NATS "going away"), the TCP ports a
 * process listens on (from /proc), a Prometheus text-format parser, polling.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import { createServer as createHttpServer } from "node:http"
import { createServer as createTcpServer } from "node:net"

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createTcpServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** Polls `f` until it returns a value (not undefined), or fails after `timeoutMs`. */
export const eventually = async <A>(
  what: string,
  f: () => A | undefined | Promise<A | undefined>,
  timeoutMs = 20_000,
  everyMs = 100,
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await f()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last === undefined ? "" : ` (${String(last)})`}`)
    await sleep(everyMs)
  }
}

export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly traceState?: string
  readonly name: string
  readonly kind: number
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
  readonly resource: Record<string, unknown>
}

export const attr = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes?.find((a) => a.key === key)?.value
  return value === undefined ? undefined : Object.values(value)[0]
}

/** A local OTLP/HTTP receiver: collects the spans POSTed as JSON to /v1/traces. */
export const otlpReceiver = async () => {
  const spans: OtlpSpan[] = []
  const contentTypes = new Set<string>()
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") {
        contentTypes.add(String(req.headers["content-type"]))
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: ReadonlyArray<{
            resource: Record<string, unknown>
            scopeSpans: ReadonlyArray<{ spans: ReadonlyArray<Omit<OtlpSpan, "resource">> }>
          }>
        }
        for (const rs of body.resourceSpans)
          for (const ss of rs.scopeSpans) for (const span of ss.spans) spans.push({ ...span, resource: rs.resource })
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** The rows of this host's TCP socket tables (IPv4 and IPv6), split into columns. */
const tcpRows = (): Array<Array<string>> => {
  const rows: Array<Array<string>> = []
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = ""
    try {
      text = readFileSync(file, "utf8")
    } catch {
      continue
    }
    for (const line of text.trim().split("\n").slice(1)) rows.push(line.trim().split(/\s+/))
  }
  return rows
}

/** The TCP ports process `pid` listens on. */
export const listeningPortsOf = (pid: number): number[] => {
  const own = new Set<string>()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match !== null) own.add(match[1]!)
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = []
  // state 0A: listening; column 9: the socket's inode; column 1: local address:port (hex)
  for (const cols of tcpRows()) if (cols[3] === "0A" && own.has(cols[9]!)) ports.push(Number.parseInt(cols[1]!.split(":")[1]!, 16))
  return ports
}

/** One sample line of the Prometheus text format. */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export const parseExposition = (text: string) => {
  const samples: Sample[] = []
  const types = new Map<string, string>()
  const typeLines: string[] = []
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ")
      types.set(name!, type!)
      typeLines.push(name!)
      continue
    }
    if (line.startsWith("#") || line.trim() === "") continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const m of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!
    samples.push({ name: match[1]!, labels, value: match[3] === "+Inf" ? Infinity : Number(match[3]) })
  }
  const find = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  const value = (name: string, labels: Record<string, string> = {}) => find(name, labels).reduce((sum, s) => sum + s.value, 0)
  return { samples, types, typeLines, find, value }
}
