// A turn whose route needs no exact counter is counted in one step when its
// tenant is given (the assembler's turns): the same answer, fallback reason
// and tally as the routed path a turn without a tenant takes.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TokenCounter } from "../src/index.ts"

const turn = (fields: Partial<TokenCounter.CountTurnInput>): TokenCounter.CountTurnInput => ({
  model: { provider: "openai", name: "gpt-4o" },
  system: [{ id: "s", text: "Be brief.", cache: "none" }],
  tools: [],
  messages: [{ role: "user", parts: [{ type: "text", text: "hello there" }] }],
  ...fields,
})

describe("TokenCounter local route", () => {
  it.scoped("with or without a tenant: the same counts and the same fallback reasons", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ backend: "auto" })
      for (const backend of [undefined, "tiktoken", "heuristic", "anthropic_api", "openai_api"] as const) {
        const given = yield* service.countTurn(turn({ tenant: "acme", backend }))
        const routed = yield* service.countTurn(turn({ backend }))
        expect(given).toEqual(routed)
      }
      expect(yield* service.countTurn(turn({ tenant: "acme", backend: "anthropic_api" }))).toMatchObject({
        backend: "tiktoken",
        fallback: "unsupported_provider",
      })
      expect(yield* service.countTurn(turn({ tenant: "acme", backend: "openai_api" }))).toMatchObject({
        backend: "tiktoken",
        fallback: "not_configured",
      })
      expect((yield* service.countTurn(turn({ tenant: "acme" }))).fallback).toBeUndefined()
      const metrics = yield* service.metrics
      // each asked-for backend that could not answer: twice above (with and without a tenant), once more after
      expect(metrics.fallbacks).toEqual({ unsupported_provider: 3, not_configured: 3 })
      expect(metrics.turns).toBe(13)
    }),
  )
})
