/**
 * Properties of the OpenAI explicit breakpoint layout over random histories:
 * on a GPT-5.6 model every Chat Completions and Responses body passes the
 * API's validation (the fake provider's validator), carries at most 4 marks
 * (the report's count), none on assistant output, and the same prompt tokens
 * as the body without them; on an older model there are none.
 */
import { FakeProvider } from "@ctxd/testing"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as ExplicitCache from "../src/providers/openai-chat/ExplicitCache.ts"
import * as ChatValidate from "../src/providers/openai-chat/Validate.ts"
import * as ResponsesValidate from "../src/providers/openai-responses/Validate.ts"
import { assembleInput } from "./Generators.ts"

type Json = Record<string, unknown>

const items = (body: Json): Array<Json> => ((body["messages"] ?? body["input"]) as Array<Json> | undefined) ?? []

/** The roles (or item types) of the items that carry a mark, one entry per mark. */
const marked = (body: Json): Array<string> =>
  items(body).flatMap((item) =>
    [item["content"], item["output"]]
      .flatMap((c) => (Array.isArray(c) ? (c as Array<Json>) : []))
      .filter((p) => ExplicitCache.FIELD in p)
      .map(() => String(item["role"] ?? item["type"])),
  )

const without = (body: Json): Json => ({
  ...body,
  [body["messages"] === undefined ? "input" : "messages"]: ExplicitCache.unmarked(items(body)),
})

describe("OpenAI explicit breakpoints (properties over random histories)", () => {
  it("GPT-5.6: valid bodies, ≤ 4 marks as reported, none on assistant output, the same tokens as unmarked", () => {
    const model = Models.resolve({ provider: "openai", name: "gpt-5.6" })
    fc.assert(
      fc.property(assembleInput, (input) => {
        for (const format of ["openai", "openai-responses"] as const) {
          const { request, report } = Pipeline.run({ ...input, model, format })
          // an empty conversation is refused before it gets here (the validate stage)
          if (items(request).length > 0) {
            const problem = format === "openai" ? ChatValidate.validate(request) : ResponsesValidate.validate(request, "responses")
            expect(problem).toBeUndefined()
          }
          const marks = marked(request)
          expect(marks.length).toBe(report.cache.breakpoints)
          expect(marks.length).toBeLessThanOrEqual(4)
          expect(marks).not.toContain("assistant")
          expect(FakeProvider.countRequestTokens(format, request)).toBe(FakeProvider.countRequestTokens(format, without(request)))
        }
      }),
      { numRuns: 200 },
    )
  })

  it("older models: no marks and no prompt_cache_options", () => {
    const model = Models.resolve({ provider: "openai", name: "gpt-4.1" })
    fc.assert(
      fc.property(assembleInput, (input) => {
        for (const format of ["openai", "openai-responses"] as const) {
          const { request, report } = Pipeline.run({ ...input, model, format })
          expect(marked(request)).toEqual([])
          expect(report.cache.breakpoints).toBe(0)
          expect(request).not.toHaveProperty("prompt_cache_options")
        }
      }),
      { numRuns: 100 },
    )
  })
})
