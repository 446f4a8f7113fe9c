/**
 * One client request, start to end: route it, identify the caller, and for
 * a turn route decide what goes upstream by the request's mode:
 *
 * - `active`: the port's prompt, merged into the client's body (`Body.merge`)
 *   with the headers it requires; the usage read from the response is
 *   reported under the reply's `turnId`.
 * - `shadow`: the client's bytes go upstream at once, untouched; the port
 *   is asked alongside (`mode: "shadow"`), so it records what it would have
 *   sent, and the usage is reported once both are done.
 * - `off`: the client's bytes, nothing asked, nothing reported (metrics only).
 *
 * When the port fails or does not answer within `promptTimeoutMs` (active
 * mode): `failOpen` forwards the client's own bytes (counted in
 * `ctxd_gateway_fail_open_total` and logged), `failClosed` answers 503 in
 * the API's error shape. Pass-through routes stream the request body
 * upstream as it arrives. Logs carry the route, mode, outcome, status,
 * tenant and session, never a body, a header value or a query string (a
 * Gemini key may ride in `?key=`).
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import * as Body from "./Body.ts"
import * as DefaultSession from "./DefaultSession.ts"
import * as ErrorBody from "./ErrorBody.ts"
import * as HeaderPolicy from "./HeaderPolicy.ts"
import * as Metrics from "./Metrics.ts"
import type { Identity, Mode, Resolved, RequestInfo } from "./Options.ts"
import type { PromptReply, PromptRequest, SessionKey } from "./Port.ts"
import * as Relay from "./Relay.ts"
import * as Routes from "./Routes.ts"

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

type Asked = { readonly ok: true; readonly reply: PromptReply } | { readonly ok: false; readonly reason: "timeout" | "error" }

/**
 * Asks the port, bounded by the timeout and (active mode) by the client
 * staying: a shadow prompt outlives the response it shadows. Never rejects.
 */
const ask = (o: Resolved, request: PromptRequest, res: ServerResponse): Promise<Asked> => {
  const controller = new AbortController()
  const onGone = () => controller.abort(new Error("client gone"))
  if (request.mode !== "shadow") res.once("close", onGone)
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<Asked>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error("prompt timed out"))
      resolve({ ok: false, reason: "timeout" })
    }, o.promptTimeoutMs())
  })
  const asked = Promise.resolve()
    .then(() => o.turns.prompt(request, controller.signal))
    .then(
      // a reply without a body object is no answer: the failure policy applies as for an error
      (reply): Asked => (isRecord(reply?.body) && typeof reply.turnId === "string" ? { ok: true, reply } : { ok: false, reason: "error" }),
      (): Asked => ({ ok: false, reason: controller.signal.aborted ? "timeout" : "error" }),
    )
  return Promise.race([asked, timeout]).finally(() => {
    clearTimeout(timer)
    res.off("close", onGone)
  })
}

interface Done {
  readonly label: string
  readonly mode: Mode
  readonly outcome: Metrics.Outcome
  readonly status: number | undefined
  readonly key?: SessionKey | undefined
}

const header = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" ? value : value?.join(",")

const finish = (o: Resolved, arrived: number, path: string, d: Done): void => {
  Metrics.request(d.label, d.mode, d.outcome)
  const fields = {
    api: d.label,
    mode: d.mode,
    outcome: d.outcome,
    status: d.status,
    path,
    tenant: d.key?.tenant,
    session: d.key?.session,
    ms: Math.round(performance.now() - arrived),
  }
  if (d.outcome === "fail_open" || d.outcome === "fail_closed" || d.outcome === "upstream_unreachable")
    o.logger.warn(fields, "gateway request")
  else o.logger.info(fields, "gateway request")
}

/** Handles one request (never throws; an internal error becomes a 500 in the API's shape). */
export const handle = async (o: Resolved, agents: Relay.Agents, req: IncomingMessage, res: ServerResponse): Promise<void> => {
  const arrived = performance.now()
  const url = new URL(req.url ?? "/", "http://gateway.invalid")
  const method = req.method ?? "GET"
  const route = Routes.route(method, url.pathname, req.headers, url.searchParams)
  const info: RequestInfo = {
    provider: route.provider,
    api: route.kind === "turn" ? route.api : undefined,
    method,
    path: url.pathname,
    headers: req.headers,
  }
  const upstreamUrl = Routes.upstreamUrl(o.upstreams[route.provider], route.upstreamPath, url.search)
  const end = (d: Done) => finish(o, arrived, url.pathname, d)

  let identity: Identity
  try {
    identity = o.authenticate(info)
  } catch {
    identity = { ok: false, status: 401, message: "ctxd gateway: the caller could not be identified" }
  }
  if (!identity.ok) {
    req.resume()
    ErrorBody.send(res, route.provider, identity.status, identity.message)
    return end({ label: route.label, mode: "off", outcome: "unauthorized", status: identity.status })
  }

  if (route.kind === "pass") {
    const headers = HeaderPolicy.upstream(req.headers, identity.upstreamHeaders, undefined)
    const result = await Relay.call(
      { agents, url: upstreamUrl, method, headers, body: req, provider: route.provider, label: route.label, arrived },
      res,
    )
    return end({ label: route.label, mode: "off", outcome: result.outcome, status: result.status })
  }

  let raw: Buffer
  try {
    raw = await Body.read(req, o.maxBodyBytes)
  } catch (e) {
    const large = e instanceof Body.TooLarge
    ErrorBody.send(
      res,
      route.provider,
      large ? 413 : 400,
      large ? `ctxd gateway: ${e.message}` : "ctxd gateway: the request body could not be read",
      {
        connection: "close",
      },
    )
    return end({ label: route.label, mode: "off", outcome: large ? "too_large" : "bad_request", status: large ? 413 : 400 })
  }
  const read = performance.now()
  const plain = Body.decode(raw, header(req.headers["content-encoding"]), o.maxBodyBytes)
  if (plain.kind === "unsupported") {
    // a coding the gateway cannot read: the client's call goes as it came, ctxd is not asked
    const result = await Relay.call(
      {
        agents,
        url: upstreamUrl,
        method,
        headers: HeaderPolicy.upstream(req.headers, identity.upstreamHeaders, undefined),
        body: raw,
        provider: route.provider,
        label: route.label,
        arrived,
      },
      res,
    )
    return end({ label: route.label, mode: "off", outcome: result.outcome, status: result.status })
  }
  if (plain.kind === "too_large" || plain.kind === "broken") {
    const large = plain.kind === "too_large"
    ErrorBody.send(
      res,
      route.provider,
      large ? 413 : 400,
      large
        ? `ctxd gateway: request body larger than ${o.maxBodyBytes} bytes once decoded`
        : "ctxd gateway: the request body does not match its content-encoding",
    )
    return end({ label: route.label, mode: "off", outcome: large ? "too_large" : "bad_request", status: large ? 413 : 400 })
  }
  const body = Body.parseObject(plain.bytes)
  if (body === undefined) {
    ErrorBody.send(res, route.provider, 400, "ctxd gateway: the request body is not a JSON object")
    return end({ label: route.label, mode: "off", outcome: "bad_request", status: 400 })
  }
  const model = route.pathModel ?? (typeof body["model"] === "string" ? body["model"] : "")
  const stream = route.pathStream || body["stream"] === true

  let key: SessionKey
  let agent = "default"
  let mode: Mode
  let failure: "failOpen" | "failClosed"
  try {
    const named = (o.sessionOf ?? DefaultSession.sessionOf)({ ...info, api: route.api, body, model, tenant: identity.tenant })
    if ("ok" in named && !named.ok) {
      const status = named.error.status === 403 ? 403 : 400
      ErrorBody.send(res, route.provider, status, named.error.message)
      return end({ label: route.label, mode: "off", outcome: status === 403 ? "unauthorized" : "bad_request", status })
    }
    key = "ok" in named ? named.key : named
    agent = o.agentOf(req.headers)
    mode = o.mode(key.tenant, agent)
    failure = o.failure(key.tenant, agent)
  } catch {
    // a policy function that throws must not take the client's call down: it goes as sent
    key = { tenant: identity.tenant ?? "default", session: "unknown", from: "derived", side: false }
    mode = "off"
    failure = "failOpen"
  }

  const forward = (bytes: Buffer, ctxdHeaders: Readonly<Record<string, string>> | undefined, plainBody = false) =>
    Relay.call(
      {
        agents,
        url: upstreamUrl,
        method,
        headers: HeaderPolicy.upstream(
          req.headers,
          plainBody ? { ...identity.upstreamHeaders, "content-encoding": null } : identity.upstreamHeaders,
          ctxdHeaders,
        ),
        body: bytes,
        provider: route.provider,
        label: route.label,
        tap: mode === "off" ? undefined : { api: route.api, limit: o.maxUsageBytes },
        arrived,
        onSent: () => Metrics.addedLatency(route.label, mode, performance.now() - read),
      },
      res,
    )

  const report = (turnId: string, result: Relay.Result) => {
    if (!result.tapped) return
    Metrics.usageRead(route.label, result.read !== undefined)
    if (result.read === undefined) return
    // the port logs its own errors and never throws (Port.ts); a port that does anyway must not take the handler down
    try {
      o.turns.usage({
        key,
        turnId,
        api: route.api,
        model,
        usage: result.read.usage,
        responseId: result.read.responseId,
        mode: mode === "shadow" ? "shadow" : "active",
      })
    } catch {
      o.logger.warn({ api: route.label, tenant: key.tenant, session: key.session }, "usage report failed")
    }
  }

  if (mode === "off" || model === "") {
    const result = await forward(raw, undefined)
    return end({ label: route.label, mode, outcome: result.outcome, status: result.status, key })
  }

  const request: PromptRequest = { api: route.api, body, key, model, agent, mode, stream }
  if (mode === "shadow") {
    const asked = ask(o, request, res)
    const result = await forward(raw, undefined)
    const answer = await asked
    if (answer.ok) report(answer.reply.turnId, result)
    return end({ label: route.label, mode, outcome: result.outcome, status: result.status, key })
  }

  const answer = await ask(o, request, res)
  if (!answer.ok) {
    if (res.destroyed) return end({ label: route.label, mode, outcome: "client_gone", status: undefined, key })
    o.logger.warn(
      { api: route.label, reason: answer.reason, tenant: key.tenant, session: key.session, policy: failure },
      "ctxd prompt failed",
    )
    if (failure === "failClosed") {
      ErrorBody.send(res, route.provider, 503, "ctxd gateway: the context service is unavailable", { "retry-after": "1" })
      return end({ label: route.label, mode, outcome: "fail_closed", status: 503, key })
    }
    Metrics.failedOpen(route.label, answer.reason)
    const result = await forward(raw, undefined)
    return end({ label: route.label, mode, outcome: result.outcome === "ok" ? "fail_open" : result.outcome, status: result.status, key })
  }
  const merged = Buffer.from(JSON.stringify(Body.merge(route.api, body, answer.reply.body)), "utf8")
  // ctxd's body goes uncompressed, whatever coding the client's came in
  const result = await forward(merged, answer.reply.headers, true)
  report(answer.reply.turnId, result)
  return end({ label: route.label, mode, outcome: result.outcome, status: result.status, key })
}
