import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Assignment } from "../src/index.ts"

const S = 256

const workerSets = (min: number, max: number) =>
  fc.uniqueArray(fc.string({ minLength: 1, maxLength: 24 }), { minLength: min, maxLength: max })

/** How many shards changed owner between two assignments. */
const moved = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => a.filter((owner, shard) => owner !== b[shard]).length

describe("Assignment", () => {
  it("gives every shard to one of the workers, whatever their order (every worker computes the same)", () => {
    fc.assert(
      fc.property(workerSets(1, 8), fc.integer({ min: 1, max: 300 }), (workers, shards) => {
        const owners = Assignment.assign(workers, shards)
        expect(owners.length).toBe(shards)
        expect(owners.every((o) => workers.includes(o))).toBe(true)
        expect(Assignment.assign([...workers].reverse(), shards)).toEqual(owners)
        expect(Assignment.assign([...workers, ...workers], shards)).toEqual(owners)
      }),
    )
  })

  it("is empty without workers; one worker gets everything", () => {
    expect(Assignment.assign([], S)).toEqual([])
    expect(Assignment.shardsOf(Assignment.assign(["w"], S), "w").length).toBe(S)
  })

  it("keeps every worker within ±25 % of its fair share for 2 to 8 workers at S = 256", () => {
    fc.assert(
      fc.property(workerSets(2, 8), (workers) => {
        const fair = S / workers.length
        const loads = Assignment.loads(Assignment.assign(workers, S))
        for (const w of workers) {
          const load = loads.get(w) ?? 0
          expect(load).toBeLessThanOrEqual(Math.ceil(fair))
          expect(Math.abs(load - fair) / fair).toBeLessThanOrEqual(0.25)
        }
      }),
      { numRuns: 300 },
    )
  })

  it("moves about one fair share when a worker joins or leaves", () => {
    let total = 0
    let fairTotal = 0
    fc.assert(
      fc.property(workerSets(2, 9), (workers) => {
        const before = Assignment.assign(workers.slice(1), S)
        const after = Assignment.assign(workers, S)
        // the joiner's share (at most ceil(S/N)) moves, plus a bounded cascade from the load cap
        const fair = S / workers.length
        const n = moved(before, after)
        expect(n).toBeLessThanOrEqual(2 * fair)
        expect(Assignment.shardsOf(after, workers[0]!).length).toBeLessThanOrEqual(Math.ceil(fair))
        total += n
        fairTotal += fair
        // leaving is the same pair of assignments the other way round
        expect(moved(after, before)).toBe(n)
      }),
      { numRuns: 300 },
    )
    // on average close to the minimum (one fair share per join)
    expect(total / fairTotal).toBeLessThan(1.3)
  })

  it("weights are stable unsigned 32-bit integers", () => {
    expect(Assignment.weight("worker-a", 0)).toBe(Assignment.weight("worker-a", 0))
    expect(Assignment.weight("worker-a", 0)).not.toBe(Assignment.weight("worker-b", 0))
    fc.assert(
      fc.property(fc.string(), fc.nat(100_000), (w, s) => {
        const x = Assignment.weight(w, s)
        return Number.isInteger(x) && x >= 0 && x < 2 ** 32
      }),
    )
  })
})
