// Running ctxd like a platform service, against a real worker process:
// Prometheus `/metrics` after real turns and usage reports (required names,
// sane values, bounded tenant labels), OpenTelemetry traces reaching a local
// OTLP/HTTP receiver (a turn span continuing the caller's `traceparent`, a
// child span per stage, I/O spans, no prompt text), `/healthz` and `/readyz`
// through start, NATS loss (the worker talks to NATS through a proxy the test
// cuts) and graceful shutdown, and `CTXD_HTTP_PORT=0` opening no port.
import { FakeProvider } from "@ctxd/testing"
import { headers as natsHeaders } from "@nats-io/transport-node"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"
import { tcpProxy } from "./Cluster.ts"
import { attr, eventually, freePort, listeningPortsOf, type OtlpSpan, otlpReceiver, parseExposition, sleep } from "./Observability.ts"

const natsPort = Number(new URL(process.env.NATS_URL ?? "nats://127.0.0.1:4222").port || 4222)

describe("a worker with its HTTP port and an OTLP endpoint", () => {
  let h: Harness.Harness
  let fake: FakeProvider.FakeProviderServer
  let otlp: Awaited<ReturnType<typeof otlpReceiver>>
  let proxy: Awaited<ReturnType<typeof tcpProxy>>
  let base = ""
  // tau-airline-19-3: 15 turns
  const turn = Harness.tauTurns(5)
  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`)
    return { status: res.status, type: res.headers.get("content-type"), text: await res.text() }
  }

  beforeAll(async () => {
    fake = await FakeProvider.start()
    otlp = await otlpReceiver()
    proxy = await tcpProxy(natsPort)
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    h = await Harness.start({
      NATS_URL: `nats://127.0.0.1:${proxy.port}`,
      CTXD_HTTP_PORT: String(port),
      CTXD_HTTP_HOST: "127.0.0.1",
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
    })
  })
  afterAll(async () => {
    await h?.close()
    await proxy?.close()
    await otlp?.close()
    await fake?.close()
  })

  it("listens on CTXD_HTTP_PORT, answers /healthz, and /readyz once serving", async () => {
    expect(h.worker.output()).toContain(`http server on 127.0.0.1:${new URL(base).port}`)
    expect(listeningPortsOf(h.worker.child.pid!)).toContain(Number(new URL(base).port))
    const health = await get("/healthz")
    expect(health.status).toBe(200)
    expect(JSON.parse(health.text)).toMatchObject({ ok: true, draining: false })
    const ready = await eventually("ready", async () => {
      const r = await get("/readyz")
      return r.status === 200 ? JSON.parse(r.text) : undefined
    })
    expect(ready).toMatchObject({
      ok: true,
      ready: true,
      draining: false,
      checks: { nats: { ok: true }, postgres: { ok: true }, cluster: { ok: true } },
    })
    expect((await get("/nope")).status).toBe(404)
  })

  it("continues the caller's trace: ctxd.turn with a span per stage and its I/O, no prompt text", async () => {
    const traceId = randomBytes(16).toString("hex")
    const parentId = randomBytes(8).toString("hex")
    const request = turn(0)
    const reply = await h.nc.request(h.turnSubject("obs", "traced"), JSON.stringify(request), {
      timeout: 15_000,
      headers: (() => {
        const hdrs = natsHeaders()
        hdrs.set("traceparent", `00-${traceId}-${parentId}-01`)
        hdrs.set("tracestate", "ctxd=test")
        return hdrs
      })(),
    })
    expect(reply.json<{ ok: boolean }>().ok).toBe(true)

    const stages = ["validate", "tools", "count", "loop", "compaction", "memory", "prompt", "reply"]
    const trace = await eventually("the turn's spans", () => {
      const spans = otlp.spans.filter((s) => s.traceId === traceId)
      const root = spans.find((s) => s.name === "ctxd.turn")
      if (root === undefined) return undefined
      const children = spans.filter((s) => s.parentSpanId === root.spanId)
      return stages.every((stage) => children.some((c) => c.name === `ctxd.stage.${stage}`)) && spans.some((s) => s.name === "db.query")
        ? { spans, root, children }
        : undefined
    })
    const { spans, root, children } = trace
    expect(otlp.contentTypes).toEqual(new Set(["application/json"]))
    // the turn continues the caller's span, with its tracestate
    expect(root.parentSpanId).toBe(parentId)
    expect(root.traceState).toBe("ctxd=test")
    expect(root.kind).toBe(2) // SPAN_KIND_SERVER
    expect(attr(root, "ctxd.tenant")).toBe("obs")
    expect(attr(root, "ctxd.session")).toBe("traced")
    expect(attr(root, "ctxd.turn.id")).toBe("t0")
    expect(attr(root, "ctxd.turn.outcome")).toBe("ok")
    expect(attr(root, "gen_ai.request.model")).toBe("claude-sonnet-4-5")
    expect(Number(attr(root, "ctxd.tokens.out"))).toBeGreaterThan(0)
    expect(Number(attr(root, "ctxd.tokens.in"))).toBeGreaterThanOrEqual(Number(attr(root, "ctxd.tokens.out")))
    expect(attr(root, "ctxd.cache.break_reason")).toEqual(expect.any(String))
    // stages in order, each a child of the turn
    const stageSpans = children.filter((c) => c.name.startsWith("ctxd.stage."))
    expect(stageSpans.map((s) => s.name)).toEqual(stages.map((s) => `ctxd.stage.${s}`))
    // the I/O: the token count under the count stage (the provider's count_tokens under it), Postgres reads and the commit
    const byId = new Map(spans.map((s) => [s.spanId, s]))
    const parentName = (s: OtlpSpan) => (s.parentSpanId === undefined ? undefined : byId.get(s.parentSpanId)?.name)
    const count = spans.find((s) => s.name === "ctxd.count_tokens")!
    expect(parentName(count)).toBe("ctxd.stage.count")
    expect(spans.some((s) => s.name === "anthropic.count_tokens" && parentName(s) === "ctxd.count_tokens")).toBe(true)
    expect(children.map((c) => c.name)).toEqual(expect.arrayContaining(["ctxd.gather", "ctxd.commit"]))
    const queries = spans.filter((s) => s.name === "db.query")
    expect(queries.length).toBeGreaterThan(0)
    for (const q of queries) expect(attr(q, "db.system.name")).toBe("postgresql")
    // resource: the default service name
    const resourceAttrs = (root.resource.attributes ?? []) as ReadonlyArray<{ key: string; value: Record<string, unknown> }>
    expect(resourceAttrs.find((a) => a.key === "service.name")?.value).toEqual({ stringValue: "ctxd" })
    // no prompt text in any attribute
    const needles = ["changing my upcoming roundtrip flights", "As an airline agent"]
    expect(JSON.stringify(request)).toContain(needles[0])
    expect(JSON.stringify(request)).toContain(needles[1])
    const values = spans.flatMap((s) => (s.attributes ?? []).map((a) => String(Object.values(a.value)[0])))
    for (const needle of needles)
      expect(
        values.some((v) => v.includes(needle)),
        needle,
      ).toBe(false)
  })

  it("exposes the required metrics from one registry, with sane values and bounded tenant labels", async () => {
    for (let k = 1; k <= 3; k++) expect((await h.request(h.turnSubject("obs", "traced"), turn(k), 15_000)).ok).toBe(true)
    // a replayed turn and a rejected one
    expect((await h.request(h.turnSubject("obs", "traced"), turn(0), 15_000)).ok).toBe(true)
    expect((await h.request(h.turnSubject("obs", "bad"), { turnId: "x", format: "openai" })).ok).toBe(false)
    // a manual compaction (the summarizer is the fake provider)
    const compacted = await h.request(`${h.root}.v1.compact.obs.traced`, { model: turn(0).model }, 30_000)
    expect(compacted.ok, JSON.stringify(compacted)).toBe(true)
    // usage reports: 900 read, 50 written, 100 uncached per turn
    const usage = { input_tokens: 100, cache_read_input_tokens: 900, cache_creation_input_tokens: 50, output_tokens: 10 }
    for (let k = 0; k <= 3; k++) {
      const r = await h.request(`${h.root}.v1.usage.obs.traced`, { turnId: `t${k}`, usage })
      expect(r.ok, JSON.stringify(r)).toBe(true)
    }
    // more tenants than the label cap (100): each a turn and its usage report
    const tenants = Array.from({ length: 102 }, (_, i) => `tenant${i}`)
    for (let i = 0; i < tenants.length; i += 6) {
      await Promise.all(
        tenants.slice(i, i + 6).map(async (tenant) => {
          const r = await h.request(
            h.turnSubject(tenant, "s"),
            {
              turnId: "t0",
              format: "openai",
              model: { provider: "openai", name: "gpt-4o" },
              messages: [{ role: "user", content: `hello from ${tenant}` }],
            },
            15_000,
          )
          expect(r.ok, JSON.stringify(r.error)).toBe(true)
          const u = await h.request(`${h.root}.v1.usage.${tenant}.s`, { turnId: "t0", usage: { prompt_tokens: 20, completion_tokens: 5 } })
          expect(u.ok, JSON.stringify(u)).toBe(true)
        }),
      )
    }

    const scrape = await get("/metrics")
    expect(scrape.status).toBe(200)
    expect(scrape.type).toBe("text/plain; version=0.0.4; charset=utf-8")
    const m = parseExposition(scrape.text)
    // one TYPE line per family; counters end in _total once
    expect(new Set(m.typeLines).size).toBe(m.typeLines.length)
    expect(scrape.text).not.toContain("_total_total")
    const families = {
      llm_cache_read_tokens_total: "counter",
      llm_cache_creation_tokens_total: "counter",
      llm_prompt_tokens_billed_total: "counter",
      llm_cache_hit_ratio: "gauge",
      llm_compaction_triggered_total: "counter",
      llm_compaction_duration_seconds: "histogram",
      llm_prompt_tokens_estimated: "histogram",
      llm_prompt_tokens_drift: "histogram",
      ctxd_turn_duration_seconds: "histogram",
      ctxd_turns_total: "counter",
      ctxd_tokens_saved_total: "counter",
      ctxd_shards_owned: "gauge",
      ctxd_shards_assigned: "gauge",
      ctxd_mailbox_depth: "gauge",
      ctxd_turns_in_flight: "gauge",
      ctxd_in_flight_request_bytes: "gauge",
      ctxd_commit_batch_turns: "histogram",
    }
    for (const [name, type] of Object.entries(families)) expect(m.types.get(name), name).toBe(type)
    expect(scrape.text).toContain("# UNIT ctxd_turn_duration_seconds seconds")
    expect(scrape.text).toContain("# UNIT ctxd_in_flight_request_bytes bytes")

    // turns by outcome: 4 + 102 answered, 1 replayed, 1 rejected
    expect(m.value("ctxd_turns_total", { outcome: "ok" })).toBe(106)
    expect(m.value("ctxd_turns_total", { outcome: "ok", backend: "anthropic_api", exact: "true" })).toBe(4)
    expect(m.value("ctxd_turns_total", { outcome: "replayed", backend: "none" })).toBe(1)
    expect(m.value("ctxd_turns_total", { outcome: "bad_request" })).toBe(1)
    expect(m.value("ctxd_turn_duration_seconds_count", { outcome: "ok" })).toBe(106)
    const okSeconds = m.value("ctxd_turn_duration_seconds_sum", { outcome: "ok" })
    expect(okSeconds).toBeGreaterThan(0)
    expect(okSeconds).toBeLessThan(106 * 15)
    expect(m.value("ctxd_turn_duration_seconds_bucket", { outcome: "ok", le: "+Inf" })).toBe(106)
    for (const mechanism of ["window", "masking", "compression"]) expect(m.find("ctxd_tokens_saved_total", { mechanism })).toHaveLength(1)
    // every answered turn went through one commit, alone or with others (group commit): the 106
    // committed and the retried one that found its turn stored
    expect(m.value("ctxd_commit_batch_turns_sum")).toBe(107)
    expect(m.value("ctxd_commit_batch_turns_count")).toBeGreaterThanOrEqual(1)
    expect(m.value("ctxd_commit_batch_turns_count")).toBeLessThanOrEqual(106)

    // prompt estimates per model
    const claude = { model: "anthropic/claude-sonnet-4-5" }
    expect(m.value("llm_prompt_tokens_estimated_count", claude)).toBe(4)
    expect(m.value("llm_prompt_tokens_estimated_sum", claude)).toBeGreaterThan(1000)
    expect(m.value("llm_prompt_tokens_estimated_count", { model: "openai/gpt-4o" })).toBe(102)

    // billed usage: from the reports
    expect(m.value("llm_cache_read_tokens_total", { tenant: "obs" })).toBe(3600)
    expect(m.value("llm_cache_creation_tokens_total", { tenant: "obs" })).toBe(200)
    expect(m.value("llm_prompt_tokens_billed_total", { tenant: "obs" })).toBe(4200)
    expect(m.value("llm_cache_hit_ratio", { tenant: "obs" })).toBeCloseTo(3600 / 4200, 6)
    expect(m.value("llm_prompt_tokens_drift_count", claude)).toBe(4)
    expect(m.value("llm_prompt_tokens_drift_count", { model: "openai/gpt-4o" })).toBe(102)
    expect(m.find("llm_prompt_tokens_drift_bucket", { ...claude, le: "0" })).toHaveLength(1)

    // the compaction, whatever it came to
    const outcome = compacted.outcome as string
    expect(m.value("llm_compaction_triggered_total", { outcome })).toBe(1)
    expect(m.value("llm_compaction_duration_seconds_count", { outcome })).toBe(1)

    // runtime gauges, refreshed for the scrape
    expect(m.value("ctxd_shards_owned")).toBe(256)
    expect(m.value("ctxd_shards_assigned")).toBe(256)
    expect(m.value("ctxd_mailbox_depth")).toBe(0)
    expect(m.value("ctxd_turns_in_flight")).toBe(0)
    expect(m.value("ctxd_in_flight_request_bytes")).toBe(0)

    // bounded labels: 103 tenants reported, 100 labels and `other`
    const tenantLabels = new Set(m.find("llm_cache_read_tokens_total").map((s) => s.labels.tenant))
    expect(tenantLabels.size).toBe(101)
    expect(tenantLabels.has("other")).toBe(true)
    expect(tenantLabels.has("obs")).toBe(true)
    expect(m.value("llm_prompt_tokens_billed_total", { tenant: "other" })).toBe(3 * 20)
    for (const s of m.samples.filter((x) => x.name !== "target_info")) expect(Object.keys(s.labels).length, s.name).toBeLessThanOrEqual(4)

    // the NATS metrics endpoint reads the same registry
    const json = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
    const names = new Set((json.metrics as ReadonlyArray<{ name: string }>).map((x) => x.name))
    for (const name of [
      "ctxd_turns_total",
      "ctxd_tokens_saved_total",
      "llm_cache_hit_ratio",
      "llm_prompt_tokens_drift",
      "ctxd_shards_owned",
    ]) {
      expect(names.has(name), name).toBe(true)
    }
    const saved = (json.metrics as ReadonlyArray<{ name: string; tags: Record<string, string> }>).find(
      (x) => x.name === "ctxd_tokens_saved_total" && x.tags.kind === "masking",
    )
    expect(saved?.tags.mechanism).toBe("masking")
  })

  it("is not ready while NATS is unreachable, and ready again once it is back", async () => {
    await proxy.cut()
    const lost = await eventually("not ready", async () => {
      const r = await get("/readyz")
      return r.status === 503 ? JSON.parse(r.text) : undefined
    })
    expect(lost).toMatchObject({ ready: false, checks: { nats: { ok: false }, postgres: { ok: true } } })
    expect((await get("/healthz")).status).toBe(200)
    await proxy.restore()
    const back = await eventually(
      "ready again",
      async () => {
        const r = await get("/readyz")
        return r.status === 200 ? JSON.parse(r.text) : undefined
      },
      30_000,
    )
    expect(back.checks.nats).toEqual({ ok: true })
  })

  it("reports draining (503) first when it shuts down, while the turns in flight finish", async () => {
    // the provider's count takes 1.5 s (new content: no cached count): a turn stays in flight
    fake.control({ latencyMs: 1_500 })
    const slow = h.request(
      h.turnSubject("obs", "slow"),
      { ...turn(0), messages: [{ role: "user", content: `a slow one ${randomBytes(8).toString("hex")}` }] },
      20_000,
    )
    await eventually(
      "a turn in flight",
      async () => {
        const m = parseExposition((await get("/metrics")).text)
        return m.value("ctxd_turns_in_flight") >= 1 ? true : undefined
      },
      10_000,
      20,
    )
    const exit = h.worker.stop("SIGTERM")
    const seen: number[] = []
    let draining: unknown
    let healthWhileDraining: number | undefined
    for (;;) {
      let status: number
      try {
        const r = await get("/readyz")
        status = r.status
        if (status === 503 && draining === undefined) {
          draining = JSON.parse(r.text)
          healthWhileDraining = (await get("/healthz")).status
        }
      } catch {
        break // the port is closed: the process is (nearly) gone
      }
      seen.push(status)
      await sleep(10)
    }
    expect((await slow).ok).toBe(true)
    expect(await exit).toBe(0)
    expect(draining).toMatchObject({ ready: false, draining: true, checks: { draining: { ok: false } } })
    expect(healthWhileDraining).toBe(200)
    // never ready again once it said not ready
    expect(seen.slice(seen.indexOf(503)).every((s) => s === 503)).toBe(true)
    expect(seen.filter((s) => s === 503).length).toBeGreaterThan(1)
  })
})

describe("CTXD_HTTP_PORT=0", () => {
  let h: Harness.Harness
  beforeAll(async () => {
    h = await Harness.start({ CTXD_HTTP_PORT: "0" })
  })
  afterAll(async () => {
    await h?.close()
  })

  it("opens no port at all", async () => {
    expect(h.worker.output()).not.toContain("http server on")
    expect(listeningPortsOf(h.worker.child.pid!)).toEqual([])
    // and still serves turns and the NATS metrics
    const reply = await h.request(h.turnSubject("off", "s"), {
      turnId: "t0",
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      messages: [{ role: "user", content: "hello" }],
    })
    expect(reply.ok).toBe(true)
    const json = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
    expect((json.metrics as ReadonlyArray<{ name: string }>).some((x) => x.name === "ctxd_turns_total")).toBe(true)
  })
})
