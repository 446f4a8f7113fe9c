import { describe, expect, it } from "vitest"
import * as V8Flags from "../src/V8Flags.ts"

describe("V8Flags", () => {
  it("sets its flags unless node's command line names them, either way and in either spelling", () => {
    expect(V8Flags.toSet([])).toEqual(["--external-memory-accounted-in-global-limit"])
    expect(V8Flags.toSet(["--max-old-space-size=1024", "--enable-source-maps"])).toEqual(["--external-memory-accounted-in-global-limit"])
    expect(V8Flags.toSet(["--no-external-memory-accounted-in-global-limit"])).toEqual([])
    expect(V8Flags.toSet(["--external_memory_accounted_in_global_limit"])).toEqual([])
    expect(V8Flags.toSet(["--external-memory-accounted-in-global-limit"])).toEqual([])
  })
})
