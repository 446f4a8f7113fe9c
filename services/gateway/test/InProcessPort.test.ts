/**
 * The in-process port: a client's request (as each API's client sends it,
 * whole history, tools ctxd does not model) through the worker's turn shell
 * in this process; the body laid over the client's, as the gateway sends
 * it, is accepted by the strict fake provider through each official SDK.
 * (The SDKs may retry once: a pooled keep-alive socket the fake closed while
 * a first turn loaded its tokenizer resets; a 400 is never retried.)
 */
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import { FakeProvider } from "@ctxd/testing"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PromptRequest, TurnPort } from "../src/Port.ts"
import * as InProcessPort from "../src/ports/InProcessPort.ts"
import * as Shadow from "../src/Shadow.ts"

type Json = Record<string, unknown>

let server: FakeProvider.FakeProviderServer
let port: TurnPort
let shadow: Shadow.Recorder
const records: Array<Shadow.Record> = []

beforeAll(async () => {
  server = await FakeProvider.start()
  shadow = Shadow.make({ sink: (r) => records.push(r) })
  port = InProcessPort.make({ shadow })
})
afterAll(async () => {
  await port.close()
  await server.close()
})

const key = (session: string) => ({ tenant: "gwrun", session, from: "header", side: false }) as const
const ask = (api: PromptRequest["api"], session: string, body: Json, model: string, mode?: "shadow") =>
  port.prompt({ api, body, key: key(session), model, ...(mode === undefined ? {} : { mode }) }, new AbortController().signal)

const SYSTEM = "You are a careful assistant. Answer briefly."

describe("InProcessPort", () => {
  it("Anthropic Messages: two turns of a growing history, each accepted upstream", async () => {
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 1 })
    const client: Json = {
      model: "claude-sonnet-4-6",
      max_tokens: 256,
      system: SYSTEM,
      metadata: { user_id: "u1" },
      tools: [
        { name: "read_file", description: "read a file", input_schema: { type: "object", properties: { path: { type: "string" } } } },
      ],
      messages: [{ role: "user", content: "What is in README.md?" }],
    }
    const first = await ask("anthropic-messages", "a1", client, "claude-sonnet-4-6")
    expect(first.turnId).toMatch(/^gw-/)
    const sent = { ...client, ...first.body }
    expect(sent.metadata).toEqual({ user_id: "u1" })
    expect(sent.max_tokens).toBe(256)
    const answer = await anthropic.messages.create(sent as never)
    const next = {
      ...client,
      messages: [
        ...(client.messages as Array<Json>),
        { role: "assistant", content: answer.content },
        { role: "user", content: "And in LICENSE?" },
      ],
    }
    const second = await ask("anthropic-messages", "a1", next, "claude-sonnet-4-6")
    await anthropic.messages.create({ ...next, ...second.body } as never)
    expect(second.turnId).not.toBe(first.turnId)
    // the client's whole history each time, stored once: the second turn matched the first's message, appended two
    expect(first.report.history).toMatchObject({ mode: "client", branch: 0, matched: 0, appended: 1 })
    expect(second.report.history).toMatchObject({ mode: "client", branch: 0, matched: 1, appended: 2 })
  })

  it("OpenAI Chat Completions", async () => {
    const openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 1 })
    const client: Json = {
      model: "gpt-5-mini",
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: "hello" },
      ],
      temperature: 0,
    }
    const reply = await ask("openai-chat", "c1", client, "gpt-5-mini")
    const sent = { ...client, ...reply.body }
    expect(sent.temperature).toBe(0)
    const answer = await openai.chat.completions.create(sent as never)
    expect(answer.choices.length).toBe(1)
  })

  it("OpenAI Responses: hosted tools pass as they came", async () => {
    const openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 1 })
    const client: Json = { model: "gpt-5-mini", instructions: SYSTEM, input: "hello", store: false }
    const reply = await ask("openai-responses", "r1", client, "gpt-5-mini")
    const answer = await openai.responses.create({ ...client, ...reply.body } as never)
    expect(answer.usage?.input_tokens).toBeGreaterThan(0)
  })

  it("Gemini generateContent (REST body)", async () => {
    const ai = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: server.url, retryOptions: { attempts: 1 } } })
    const client: Json = {
      systemInstruction: { parts: [{ text: SYSTEM }] },
      contents: [{ role: "user", parts: [{ text: "hello" }] }],
      generationConfig: { temperature: 0 },
    }
    const reply = await ask("gemini", "g1", client, "models/gemini-2.5-flash")
    const body = { ...client, ...reply.body } as Json
    const { contents, systemInstruction, tools, generationConfig } = body
    const answer = await ai.models.generateContent({
      model: "gemini-2.5-flash",
      contents: contents as never,
      config: { ...(generationConfig as Json), systemInstruction, ...(tools === undefined ? {} : { tools }) } as never,
    })
    expect(answer.usageMetadata?.promptTokenCount).toBeGreaterThan(0)
  })

  it("shadow: the reply is recorded and priced against the client's body", async () => {
    const client: Json = { model: "claude-sonnet-4-6", max_tokens: 64, system: SYSTEM, messages: [{ role: "user", content: "hi" }] }
    const reply = await ask("anthropic-messages", "sh1", client, "claude-sonnet-4-6", "shadow")
    expect(records.at(-1)).toMatchObject({ tenant: "gwrun", session: "sh1", turnId: reply.turnId, api: "anthropic-messages" })
    port.usage({
      key: key("sh1"),
      turnId: reply.turnId,
      api: "anthropic-messages",
      model: "claude-sonnet-4-6",
      usage: { input_tokens: 12, output_tokens: 3 },
      mode: "shadow",
    })
    const totals = shadow.session("gwrun", "sh1")!
    expect(totals.requests).toBe(1)
    expect(totals.clientUsd).toBeGreaterThan(0)
    expect(totals.billed).toEqual({ input_tokens: 12, output_tokens: 3 })
    expect(shadow.tenant("gwrun")!.requests).toBeGreaterThanOrEqual(1)
  })

  it("a request ctxd cannot take whole goes as the client sent it, and its usage is nobody's turn", async () => {
    const client: Json = { model: "gpt-5-mini", input: "and then?", previous_response_id: "resp_abc", stream: true }
    const reply = await ask("openai-responses", "r2", client, "gpt-5-mini")
    expect(reply.body).toEqual(client)
    expect(reply.headers).toEqual({})
    port.usage({ key: key("r2"), turnId: reply.turnId, api: "openai-responses", model: "gpt-5-mini", usage: { input_tokens: 5 } })
  })

  it("a request the engine rejects rejects the prompt; an aborted wait rejects at once; after close, no turns", async () => {
    await expect(ask("anthropic-messages", "bad", { messages: [{ role: "robot", content: "x" }] }, "claude-sonnet-4-6")).rejects.toThrow()
    const aborted = new AbortController()
    aborted.abort(new Error("timeout"))
    await expect(
      port.prompt(
        { api: "openai-chat", body: { messages: [{ role: "user", content: "x" }] }, key: key("ab"), model: "gpt-5-mini" },
        aborted.signal,
      ),
    ).rejects.toThrow("timeout")
    expect(await port.ready()).toBe(true)
    const other = InProcessPort.make()
    await other.close()
    expect(await other.ready()).toBe(false)
    await expect(
      other.prompt(
        { api: "openai-chat", body: { messages: [{ role: "user", content: "x" }] }, key: key("c"), model: "gpt-5-mini" },
        new AbortController().signal,
      ),
    ).rejects.toThrow("closed")
  })
})
