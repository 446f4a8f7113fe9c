// Workspace bundles end to end: a worker started with CTXD_WORKSPACE_ROOT on a
// temporary directory answers `system: {workspace: "acme-bot"}` with the
// scope's Markdown files as system sections, in every provider format; editing
// SOUL.md changes the next turn's prompt without a restart (the watcher drops
// the cached bundle: seen in the worker's metrics); a missing scope and a
// worker without a root answer a coded BadRequest. Raw nats.js client, real
// NATS and Postgres.
import { WorkerProcess } from "@ctxd/testing"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const root = mkdtempSync(join(tmpdir(), "ctxd-workspaces-"))
const scope = join(root, "acme-bot")
mkdirSync(scope)
const files = {
  "IDENTITY.md": "# Identity\nYou are Acme's support agent, Wile.",
  "SOUL.md": "# Soul\nBe patient and precise.",
  "USER.md": "# User\nThe user prefers short answers.",
  "AGENTS.md": "# Agents\nEscalate refunds above 100 USD.",
  "TOOLS.md": "# Tools\nThe order tool is read-only.",
  "notes.txt": "NOT MARKDOWN: never in a prompt",
}
for (const [name, text] of Object.entries(files)) writeFileSync(join(scope, name), text)
const ordered = [files["IDENTITY.md"], files["SOUL.md"], files["USER.md"], files["AGENTS.md"]]

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start({ CTXD_WORKSPACE_ROOT: root, CTXD_WORKSPACE_DEBOUNCE_MS: "100" })
})
afterAll(async () => {
  await h?.close()
  rmSync(root, { recursive: true, force: true })
})

/** A first turn of `session` in `format` with `system`. */
const request = (format: string, system: unknown, turnId = "t1") => {
  const user = "Where is my order?"
  const base = { turnId, system }
  switch (format) {
    case "anthropic":
      return { ...base, format, model: { provider: "anthropic", name: "claude-sonnet-4-5" }, messages: [{ role: "user", content: user }] }
    case "openai":
      return { ...base, format, model: { provider: "openai", name: "gpt-4o" }, messages: [{ role: "user", content: user }] }
    case "openai-responses":
      return { ...base, format, model: { provider: "openai", name: "gpt-4.1" }, input: [{ role: "user", content: user }] }
    default:
      return {
        ...base,
        format,
        model: { provider: "google", name: "gemini-2.5-flash" },
        contents: [{ role: "user", parts: [{ text: user }] }],
      }
  }
}

/** Where each of `texts` starts in the body's JSON (-1: absent). */
const positions = (body: unknown, texts: ReadonlyArray<string>) => {
  const json = JSON.stringify(body)
  return texts.map((t) => json.indexOf(JSON.stringify(t).slice(1, -1)))
}

type MetricRow = { name: string; tags: Record<string, string>; value?: number }
const metric = async (name: string, tags: Record<string, string> = {}) => {
  const json = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
  const rows = (json.metrics as ReadonlyArray<MetricRow>).filter(
    (m) => m.name === name && Object.entries(tags).every(([k, v]) => m.tags[k] === v),
  )
  return rows.reduce((n, m) => n + (m.value ?? 0), 0)
}

describe("workspace bundles", () => {
  it("sends the scope's files as system sections, fixed files in order then the extras, in every provider format", async () => {
    for (const format of ["anthropic", "openai", "openai-responses", "gemini"]) {
      const reply = await h.request(h.turnSubject("acme", `ws-${format}`), request(format, { workspace: "acme-bot", extras: ["TOOLS"] }))
      expect(reply.error, format).toBeUndefined()
      const at = positions(reply.request, [...ordered, files["TOOLS.md"]])
      expect(
        at.every((p) => p >= 0),
        `${format}: every file in the body`,
      ).toBe(true)
      expect(
        [...at].sort((a, b) => a - b),
        `${format}: in order`,
      ).toEqual(at)
      expect(positions(reply.request, ["Where is my order?"])[0], format).toBeGreaterThan(0)
      expect(JSON.stringify(reply.request), format).not.toContain("NOT MARKDOWN")
      expect(reply.report.tokens.system, format).toBeGreaterThan(20)
    }
    // Anthropic: one system block per file
    const anthropic = await h.request(h.turnSubject("acme", "ws-blocks"), request("anthropic", { workspace: "acme-bot" }))
    expect(anthropic.request.system.map((b: { text: string }) => b.text)).toEqual(ordered)
    expect(await metric("ctxd_workspace_cache_hits_total")).toBeGreaterThanOrEqual(3)
    expect(await metric("ctxd_workspace_cache_misses_total")).toBeGreaterThanOrEqual(2)
  })

  it("editing SOUL.md changes the next turn's prompt, without a restart", async () => {
    const subject = h.turnSubject("acme", "ws-edit")
    const first = await h.request(subject, request("anthropic", { workspace: "acme-bot" }, "t1"))
    expect(first.request.system[1].text).toBe(files["SOUL.md"])
    const dropped = await metric("ctxd_workspace_cache_invalidations_total", { reason: "change" })

    writeFileSync(join(scope, "SOUL.md"), "# Soul\nBe cheerful.")
    // the watcher drops the bundle once the debounce has passed
    for (let i = 0; i < 200 && (await metric("ctxd_workspace_cache_invalidations_total", { reason: "change" })) === dropped; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(await metric("ctxd_workspace_cache_invalidations_total", { reason: "change" })).toBeGreaterThan(dropped)
    const second = await h.request(subject, {
      ...request("anthropic", { workspace: "acme-bot" }, "t2"),
      messages: [
        { role: "assistant", content: "Let me check." },
        { role: "user", content: "Thanks." },
      ],
    })
    expect(second.error).toBeUndefined()
    expect(second.request.system.map((b: { text: string }) => b.text)).toEqual([ordered[0], "# Soul\nBe cheerful.", ordered[2], ordered[3]])
  })

  it("a scope that does not exist, or a name that is not a token, is a BadRequest; nothing is stored", async () => {
    const missing = await h.request(h.turnSubject("acme", "ws-missing"), request("openai", { workspace: "nobody" }))
    expect(missing.error).toMatchObject({ code: "BadRequest", path: "system.workspace" })
    expect(missing.error.message).toContain("no workspace nobody")
    for (const system of [
      { workspace: "../etc" },
      { workspace: "acme-bot", extras: ["../../passwd"] },
      { workspace: "acme-bot", extras: ["a/b.md"] },
    ]) {
      const bad = await h.request(h.turnSubject("acme", "ws-traversal"), request("openai", system))
      expect(bad.error?.code, JSON.stringify(system)).toBe("BadRequest")
    }
    const rows = await h.sql("SELECT count(*)::int AS n FROM ctxd_sessions WHERE session IN ('ws-missing', 'ws-traversal')")
    expect(rows[0]).toEqual({ n: 0 })
  })

  it("a worker without CTXD_WORKSPACE_ROOT answers a request naming a workspace with a coded BadRequest saying so", async () => {
    const off = await Harness.start()
    try {
      const reply = await off.request(off.turnSubject("acme", "ws-off"), request("anthropic", { workspace: "acme-bot" }))
      expect(reply.error).toMatchObject({ code: "BadRequest", path: "system.workspace" })
      expect(reply.error.message).toContain("CTXD_WORKSPACE_ROOT")
      // the old shapes of `system` decode as before
      const plain = await off.request(off.turnSubject("acme", "ws-plain"), request("anthropic", [{ id: "a", text: "Section A." }]))
      expect(plain.request.system.map((b: { text: string }) => b.text)).toEqual(["Section A."])
    } finally {
      await off.close()
    }
  }, 90_000)
})

it("a worker whose CTXD_WORKSPACE_ROOT is not a directory refuses to start, saying so", async () => {
  const started = WorkerProcess.start({ CTXD_SUBJECT_ROOT: "t_never", CTXD_WORKSPACE_ROOT: join(root, "nope") }, { readyTimeoutMs: 40_000 })
  await expect(started.then((w) => w.stop())).rejects.toThrow(/CTXD_WORKSPACE_ROOT .*nope is not a directory/)
}, 60_000)
