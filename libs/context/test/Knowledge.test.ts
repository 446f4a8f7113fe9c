import { describe, expect, it } from "vitest"
import * as Knowledge from "../src/Knowledge.ts"

const docs: Array<Knowledge.Doc> = [
  { id: "refunds", title: "Refund   policy\nfor all fares", text: "Refunds within 24 hours." },
  { id: "baggage", title: "Baggage allowance", text: "Two bags." },
]

describe("Knowledge", () => {
  it("renders a compact index sorted by id, one line per document", () => {
    expect(Knowledge.index(docs)).toBe(
      [
        "Knowledge base (call load_knowledge with an id to read a document):",
        "- baggage: Baggage allowance",
        "- refunds: Refund policy for all fares",
      ].join("\n"),
    )
    expect(Knowledge.index([])).toBe("")
    expect(Knowledge.section([])).toBeUndefined()
    expect(Knowledge.section(docs)).toEqual({ id: "ctxd-knowledge", text: Knowledge.index(docs), cache: "5m" })
    const long = Knowledge.index([{ id: "x", title: "t".repeat(500), text: "" }]).split("\n")[1]!
    expect(long.length).toBeLessThanOrEqual("- x: ".length + Knowledge.TITLE_CHARS)
  })

  it("has a stable tool schema that does not list the ids", () => {
    expect(Knowledge.tool.name).toBe("load_knowledge")
    expect(JSON.stringify(Knowledge.tool.inputSchema)).not.toContain("refunds")
    expect(Knowledge.tool.inputSchema).toMatchObject({ required: ["id"] })
  })

  it("answers with the document, or an error listing the ids", () => {
    expect(Knowledge.answer({ id: "refunds" }, docs)).toEqual({
      ok: true,
      text: "# Refund policy for all fares (refunds)\n\nRefunds within 24 hours.",
    })
    const missing = Knowledge.answer({ id: "pets" }, docs)
    expect(missing.ok).toBe(false)
    expect(missing.text).toContain('No document with id "pets"')
    expect(missing.text).toContain("- baggage: Baggage allowance")
    expect(Knowledge.answer({}, docs).text).toContain('Missing argument "id"')
    expect(Knowledge.answer({ id: "x" }, []).text).toContain("The knowledge base is empty.")
  })
})
