/** A turn's options: environment < config file `defaults` < tenant < agent < request, read from the config's current snapshot each turn. */
import { RuntimeConfig } from "@ctxd/config"
import type { Turn } from "@ctxd/contracts"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as AssemblerConfig from "../src/AssemblerConfig.ts"
import * as Options from "../src/turn/Options.ts"

const configOf = (
  runtime: RuntimeConfig.RuntimeConfigService,
  env: Turn.Options = {},
  loop: Turn.Options["loop"] = {},
): AssemblerConfig.Config => ({
  ...AssemblerConfig.defaults,
  defaults: env,
  loop: loop ?? {},
  sections: runtime.current,
  defaultToolsets: [],
})

describe("Options.merge precedence", () => {
  const runtime = RuntimeConfig.memory({
    defaults: { maskKeep: 2, toolCompression: "minify", windowMessages: 30, loop: { policy: "escalate", repeatedCall: { threshold: 4 } } },
    tenants: {
      acme: {
        maskKeep: 3,
        toolCompression: "truncate",
        agent: "coder",
        providers: { anthropic: { apiKeyEnv: "ACME_KEY" } },
        share: { turnsPercent: 10 },
      },
    },
    agents: { coder: { maskKeep: 4, loop: { policy: "off" } }, writer: { maskKeep: 5 } },
  })
  const config = configOf(runtime, { maskKeep: 1, windowMessages: 40, freshTailMessages: 16 }, { policy: "nudge" })

  it("each layer wins over the ones below it, field by field", () => {
    // another tenant, no agent: file defaults over the environment
    expect(Options.merge(config, "other", undefined)).toMatchObject({
      maskKeep: 2,
      toolCompression: "minify",
      windowMessages: 30,
      freshTailMessages: 16,
    })
    // the tenant's section (its agent `coder` too); its providers and share are not turn options
    const acme = Options.merge(config, "acme", undefined)
    expect(acme).toMatchObject({
      maskKeep: 4,
      toolCompression: "truncate",
      agent: "coder",
      loop: { policy: "off", repeatedCall: { threshold: 4 } },
    })
    expect(acme).not.toHaveProperty("providers")
    expect(acme).not.toHaveProperty("share")
    // the request's agent selects the agent section; the request's own options win
    expect(Options.merge(config, "acme", { agent: "writer" })).toMatchObject({ maskKeep: 5, loop: { policy: "escalate" } })
    expect(Options.merge(config, "acme", { maskKeep: 9, loop: { policy: "nudge" } })).toMatchObject({
      maskKeep: 9,
      loop: { policy: "nudge", repeatedCall: { threshold: 4 } },
    })
    expect(Options.resolve(config, "acme", undefined).loop.policy).toBe("off")
    expect(Options.resolve(config, "other", undefined).loop.policy).toBe("escalate")
  })

  it("reads the current snapshot: a reload applies to the next resolve", () => {
    const live = RuntimeConfig.memory({ defaults: { maskKeep: 2 } })
    const c = configOf(live)
    expect(Options.resolve(c, "t", undefined).pipeline.maskKeep).toBe(2)
    live.set({ defaults: { maskKeep: 7 } })
    expect(Options.resolve(c, "t", undefined).pipeline.maskKeep).toBe(7)
    // a pinned config keeps the snapshot of its turn
    const pinned = AssemblerConfig.pinned(c)
    live.set({ defaults: { maskKeep: 8 } })
    expect(Options.resolve(pinned, "t", undefined).pipeline.maskKeep).toBe(7)
  })

  it("property: the value in effect is the highest layer's that sets it", () => {
    const layer = fc.option(fc.integer({ min: 0, max: 50 }), { nil: undefined })
    fc.assert(
      fc.property(layer, layer, layer, layer, layer, (env, file, tenant, agent, request) => {
        const set = (v: number | undefined): Turn.Options => (v === undefined ? {} : { maskKeep: v })
        const c = configOf(RuntimeConfig.memory({ defaults: set(file), tenants: { t: set(tenant) }, agents: { a: set(agent) } }), set(env))
        const expected = [request, agent, tenant, file, env].find((v) => v !== undefined)
        expect(Options.merge(c, "t", { agent: "a", ...set(request) }).maskKeep).toBe(expected)
      }),
    )
  })
})
