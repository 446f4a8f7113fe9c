// The worker's HTTP port in-process: probe transitions (starting, ready,
// failing check, draining), the Prometheus exposition of Effect metrics
// (names, `_total`, types, units), 404/405, and the port closing with its
// scope.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Metric, MetricBoundaries, Scope } from "effect"
import { createServer } from "node:net"
import * as HttpServer from "../src/HttpServer.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as WorkerStatus from "../src/WorkerStatus.ts"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

const telemetry = Effect.runSync(Telemetry.config)

/** A server on a free port with a fresh status, in a scope the test closes. */
const start = Effect.gen(function* () {
  const port = yield* Effect.promise(freePort)
  const status = WorkerStatus.make()
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(
    Layer.merge(Layer.succeed(WorkerStatus.WorkerStatus, status), Telemetry.prometheus(telemetry, "w-test")),
    scope,
  )
  yield* HttpServer.make({ host: "127.0.0.1", port, workerId: "w-test" }).pipe(Effect.provide(context), Scope.extend(scope))
  const get = (path: string, init?: RequestInit) =>
    Effect.promise(async () => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, init)
      return { status: res.status, type: res.headers.get("content-type"), text: await res.text() }
    })
  return { port, status, scope, get }
})

describe("HttpServer", () => {
  it.live("reports starting, ready, a failing check, then draining", () =>
    Effect.gen(function* () {
      const { status, scope, get } = yield* start
      const starting = yield* get("/readyz")
      expect(starting.status).toBe(503)
      expect(JSON.parse(starting.text)).toMatchObject({ ok: false, ready: false, checks: { worker: { ok: false, detail: "starting" } } })

      let natsUp = true
      const attached = yield* Scope.make()
      yield* status
        .attach({
          checks: Effect.sync(() => ({ nats: { ok: natsUp }, postgres: { ok: true } })),
          gauges: Effect.void,
        })
        .pipe(Scope.extend(attached))
      const ready = yield* get("/readyz")
      expect(ready.status).toBe(200)
      expect(JSON.parse(ready.text)).toMatchObject({
        ok: true,
        ready: true,
        draining: false,
        checks: { nats: { ok: true }, postgres: { ok: true } },
      })

      natsUp = false
      const lost = yield* get("/readyz")
      expect(lost.status).toBe(503)
      expect(JSON.parse(lost.text).checks.nats).toEqual({ ok: false })
      natsUp = true
      expect((yield* get("/readyz")).status).toBe(200)

      yield* status.drain
      const draining = yield* get("/readyz")
      expect(draining.status).toBe(503)
      expect(JSON.parse(draining.text)).toMatchObject({ ready: false, draining: true, checks: { draining: { ok: false } } })
      const health = yield* get("/healthz")
      expect(health.status).toBe(200)
      expect(JSON.parse(health.text)).toMatchObject({ ok: true, worker: "w-test", draining: true })

      yield* Scope.close(attached, Exit.void)
      expect(JSON.parse((yield* get("/readyz")).text).checks.worker).toEqual({ ok: false, detail: "stopped" })
      yield* Scope.close(scope, Exit.void)
    }),
  )

  it.live("answers 404 for unknown paths, 405 for other methods, and closes its port with its scope", () =>
    Effect.gen(function* () {
      const { port, scope, get } = yield* start
      expect((yield* get("/nope")).status).toBe(404)
      expect((yield* get("/metrics/extra")).status).toBe(404)
      expect((yield* get("/healthz?x=1")).status).toBe(200)
      expect((yield* get("/metrics", { method: "POST", body: "x".repeat(10_000) })).status).toBe(405)
      const head = yield* get("/healthz", { method: "HEAD" })
      expect(head.status).toBe(200)
      expect(head.text).toBe("")
      yield* Scope.close(scope, Exit.void)
      const refused = yield* Effect.either(Effect.tryPromise(() => fetch(`http://127.0.0.1:${port}/healthz`)))
      expect(refused._tag).toBe("Left")
    }),
  )

  it.live("fails to start on a port in use", () =>
    Effect.gen(function* () {
      const { port, scope } = yield* start
      const again = yield* HttpServer.make({ host: "127.0.0.1", port, workerId: "w2" }).pipe(
        Effect.provide(Layer.merge(WorkerStatus.layer, Telemetry.prometheus(telemetry, "w2"))),
        Effect.scoped,
        Effect.flip,
      )
      expect(again._tag).toBe("HttpServerError")
      expect(again.message).toContain("EADDRINUSE")
      yield* Scope.close(scope, Exit.void)
    }),
  )

  it.live("renders Effect metrics in the Prometheus text format: types, _total, units, labels, gauges refreshed first", () =>
    Effect.gen(function* () {
      const { status, scope, get } = yield* start
      const counter = Metric.counter("test_http_requests_total", { description: "requests", incremental: true })
      const plain = Metric.counter("test_http_events", { description: "events", incremental: true })
      const seconds = Metric.histogram("test_http_duration_seconds", MetricBoundaries.fromIterable([0.1, 1]), "durations")
      const gauge = Metric.gauge("test_http_depth", { description: "depth" })
      yield* Metric.incrementBy(Metric.tagged(counter, "outcome", "ok"), 3)
      yield* Metric.increment(plain)
      yield* Metric.update(seconds, 0.5)
      yield* Metric.update(seconds, 5)
      let depth = 0
      const attached = yield* Scope.make()
      yield* status
        .attach({ checks: Effect.succeed({}), gauges: Effect.suspend(() => Metric.set(gauge, depth)) })
        .pipe(Scope.extend(attached))
      depth = 7

      const scrape = yield* get("/metrics")
      expect(scrape.status).toBe(200)
      expect(scrape.type).toBe("text/plain; version=0.0.4; charset=utf-8")
      const text = scrape.text
      expect(text).toContain("# TYPE test_http_requests_total counter")
      expect(text).toContain('test_http_requests_total{outcome="ok"} 3')
      expect(text).not.toContain("_total_total")
      // an incremental counter without the suffix gets it, as Prometheus wants
      expect(text).toContain("# TYPE test_http_events_total counter")
      expect(text).toContain("# TYPE test_http_duration_seconds histogram")
      expect(text).toContain("# UNIT test_http_duration_seconds seconds")
      expect(text).toContain('test_http_duration_seconds_bucket{le="0.1"} 0')
      expect(text).toContain('test_http_duration_seconds_bucket{le="1"} 1')
      expect(text).toContain('test_http_duration_seconds_bucket{le="+Inf"} 2')
      expect(text).toContain("test_http_duration_seconds_count 2")
      expect(text).toContain("test_http_duration_seconds_sum 5.5")
      expect(text).toContain("# TYPE test_http_depth gauge")
      expect(text).toContain("test_http_depth 7")
      expect(text).not.toMatch(/^# UNIT test_http_requests_total/m)
      expect(text).not.toContain("otel_scope_name")
      expect(text).toMatch(/^target_info\{[^}]*service_name="ctxd"/m)
      yield* Scope.close(attached, Exit.void)
      yield* Scope.close(scope, Exit.void)
    }),
  )
})
