// Every flow-control limit from one config: each knob moves what it should and
// nothing else, and out-of-range values are normalized as their consumers run them.
import { describe, expect, it } from "@effect/vitest"
import { Admission, FlowControl } from "../src/index.ts"

const base = FlowControl.derive()

/** The limits that differ from the defaults' under `config`. */
const changed = (config: Partial<FlowControl.Config>) => {
  const limits = FlowControl.derive(config)
  const keys = Object.keys(limits) as Array<keyof FlowControl.Limits>
  return keys.filter((key) => key !== "shareOf" && JSON.stringify(limits[key]) !== JSON.stringify(base[key])).sort()
}

describe("FlowControl.derive", () => {
  it("the defaults: 4 slots, 16 MiB, batches of 16 in 2 statements (48 waits), 64 requests a subject, mailbox 64, 10 ms", () => {
    expect(base).toMatchObject({
      turnSlots: 4,
      inflightBytes: 16 * 1024 * 1024,
      commit: { maxBatch: 16, statements: 2 },
      commitWaits: 48,
      requestsPerSubject: 64,
      requestsWaiting: 1024,
      mailbox: 64,
      tenantPercents: { bytesPercent: 50, turnsPercent: 100 },
      tenantShare: { maxBytes: 8 * 1024 * 1024, maxTurns: undefined },
      sliceMs: 10,
    })
  })

  it("each knob changes what it should", () => {
    expect(changed({ maxConcurrent: 8 })).toEqual(["requestsPerSubject", "turnSlots"])
    // below 4 slots the subjects keep their floor of 16
    expect(changed({ maxConcurrent: 2 })).toEqual(["turnSlots"])
    expect(changed({ maxInflightBytes: 1_000 })).toEqual(["inflightBytes", "tenantShare"])
    expect(changed({ commitBatch: 8 })).toEqual(["commit", "commitWaits", "requestsPerSubject"])
    expect(changed({ commitStatements: 1 })).toEqual(["commit", "commitWaits", "requestsPerSubject"])
    expect(changed({ mailbox: 3 })).toEqual(["mailbox"])
    expect(changed({ tenantBytesPercent: 25 })).toEqual(["tenantPercents", "tenantShare"])
    expect(changed({ tenantTurnsPercent: 50 })).toEqual(["tenantPercents", "tenantShare"])
    expect(changed({ sliceMs: 5 })).toEqual(["sliceMs"])
  })

  it("requests per subject: max(16, 4 × slots) plus the commit waits", () => {
    expect(FlowControl.derive({ maxConcurrent: 1 }).requestsPerSubject).toBe(16 + 48)
    expect(FlowControl.derive({ maxConcurrent: 10 }).requestsPerSubject).toBe(40 + 48)
    expect(FlowControl.derive({ maxConcurrent: 10, commitBatch: 4, commitStatements: 3 }).requestsPerSubject).toBe(40 + 16)
  })

  it("commit grouping: whole and at least 1, as the group commit runs it (CTXD_COMMIT_BATCH=0 is batches of 1)", () => {
    expect(FlowControl.derive({ commitBatch: 0 })).toMatchObject({ commit: { maxBatch: 1, statements: 2 }, commitWaits: 3 })
    expect(FlowControl.derive({ commitBatch: 1, commitStatements: 1 })).toMatchObject({
      commit: { maxBatch: 1, statements: 1 },
      commitWaits: 2,
    })
    expect(FlowControl.derive({ commitBatch: 0, commitStatements: -3 }).commitWaits).toBe(2)
    expect(FlowControl.derive({ commitBatch: 8.7, commitStatements: 3 }).commitWaits).toBe(32)
  })

  it("slots and mailbox: whole, at least 1 slot and 0 waiting", () => {
    expect(FlowControl.derive({ maxConcurrent: 0 })).toMatchObject({ turnSlots: 1, requestsPerSubject: 16 + 48 })
    expect(FlowControl.derive({ maxConcurrent: -5 }).turnSlots).toBe(1)
    expect(FlowControl.derive({ mailbox: -1 }).mailbox).toBe(0)
    expect(FlowControl.derive({ mailbox: 0 }).mailbox).toBe(0)
  })

  it("bytes in flight: 0 or less is unbounded, and so is the tenants' byte share", () => {
    for (const maxInflightBytes of [0, -1]) {
      const limits = FlowControl.derive({ maxInflightBytes, tenantTurnsPercent: 50 })
      expect(limits.inflightBytes).toBe(Number.POSITIVE_INFINITY)
      expect(limits.tenantShare).toEqual({ maxBytes: undefined, maxTurns: 2 })
      expect(Admission.make(limits.inflightBytes, limits.tenantShare).tenantMaxBytes).toBe(Number.POSITIVE_INFINITY)
    }
  })

  it("fair share: percent of the bytes rounded down, of the turn slots rounded up (at least 1); 100 % is no limit", () => {
    expect(FlowControl.derive({ tenantBytesPercent: 50, tenantTurnsPercent: 50 }).tenantShare).toEqual({
      maxBytes: 8 * 1024 * 1024,
      maxTurns: 2,
    })
    expect(
      FlowControl.derive({ maxInflightBytes: 1_000, maxConcurrent: 3, tenantBytesPercent: 25, tenantTurnsPercent: 50 }).tenantShare,
    ).toEqual({
      maxBytes: 250,
      maxTurns: 2,
    })
    expect(
      FlowControl.derive({ maxInflightBytes: 10, maxConcurrent: 1, tenantBytesPercent: 1, tenantTurnsPercent: 1 }).tenantShare,
    ).toEqual({
      maxBytes: 1,
      maxTurns: 1,
    })
    expect(FlowControl.derive({ tenantBytesPercent: 100, tenantTurnsPercent: 100 }).tenantShare).toEqual({
      maxBytes: undefined,
      maxTurns: undefined,
    })
    // a tenant's own percents, each over the default
    const limits = FlowControl.derive({ maxInflightBytes: 1_000, tenantBytesPercent: 50, tenantTurnsPercent: 50 })
    expect(limits.shareOf({ turnsPercent: 25 })).toEqual({ maxBytes: 500, maxTurns: 1 })
    expect(limits.shareOf({ bytesPercent: 100 })).toEqual({ maxBytes: undefined, maxTurns: 2 })
    expect(limits.shareOf()).toEqual(limits.tenantShare)
  })
})
