/**
 * Real workloads for tests, benchmarks and demos, shaped as replay sessions:
 * one entry per model call, each carrying the messages that arrived since the
 * previous call, exactly what an agent runtime sends in a turn request.
 *
 * Tests and the demo read the samples bundled with the repository
 * ({@link dataDir}, `examples/data`), always, so a fresh clone runs exactly
 * what CI runs. Benches read the full data set of the same layout
 * ({@link fullDataDir}: `CTXD_DATA_DIR`, or `<repo>/../shared/data`), and a
 * test that needs it is opt-in on `CTXD_DATA_DIR` ({@link optInDataDir}).
 * Every loader takes the directory, the bundled one by default.
 *
 * Every message is reduced to the keys of the contracts' OpenAI schemas
 * (`agent`, `thought`, `action`, `message_type`, a tool message's `name`...
 * are dropped), so it decodes against `OpenAI.Message`; {@link toAnthropic}
 * gives the same sessions in Anthropic format.
 */
import type { Anthropic, Gemini, OpenAI, OpenAIResponses, Turn } from "@ctxd/contracts"
import { AgentLogs } from "@ctxd/context"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { basename, join } from "node:path"
import * as AnthropicConvert from "./internal/workloads/anthropic.ts"
import * as GeminiConvert from "./internal/workloads/gemini.ts"
import * as ResponsesConvert from "./internal/workloads/responses.ts"

/** One model call of a replayed session. */
export interface ReplayTurn<M> {
  /** The messages since the previous call (the previous assistant reply, its tool results, new user input). */
  readonly messages: ReadonlyArray<M>
}

/** A recorded agent session in OpenAI Chat Completions format. */
export interface ReplaySession {
  readonly id: string
  readonly format: "openai"
  /** The session's first system message. */
  readonly system: string
  readonly tools: ReadonlyArray<OpenAI.Tool>
  readonly turns: ReadonlyArray<ReplayTurn<OpenAI.Message>>
}

/** The same session in Anthropic Messages format (see {@link toAnthropic}). */
export interface AnthropicReplaySession {
  readonly id: string
  readonly format: "anthropic"
  readonly system: string
  readonly tools: ReadonlyArray<Anthropic.Tool>
  readonly turns: ReadonlyArray<ReplayTurn<Anthropic.Message>>
}

/** The same session as OpenAI Responses input items (see {@link toResponses}). */
export interface ResponsesReplaySession {
  readonly id: string
  readonly format: "openai-responses"
  readonly system: string
  readonly tools: ReadonlyArray<OpenAIResponses.Tool>
  readonly turns: ReadonlyArray<{ readonly input: ReadonlyArray<OpenAIResponses.Item> }>
}

/** The same session as Gemini contents (see {@link toGemini}). */
export interface GeminiReplaySession {
  readonly id: string
  readonly format: "gemini"
  readonly systemInstruction: string
  readonly tools: ReadonlyArray<Gemini.Tool>
  readonly turns: ReadonlyArray<{ readonly contents: ReadonlyArray<Gemini.Content> }>
}

/** A toolset of the GitHub MCP catalog. */
export interface Toolset {
  readonly id: string
  readonly description: string
  /** Enabled by default in the GitHub MCP server. */
  readonly default: boolean
}

/** The GitHub MCP tool catalog in OpenAI tool format, each tool with `toolset` and `annotations`. */
export interface GithubCatalog {
  readonly toolsets: ReadonlyArray<Toolset>
  readonly tools: ReadonlyArray<OpenAI.Tool>
}

/** This file is `libs/testing/src/Workloads.ts`. */
const repoRoot = join(import.meta.dirname, "..", "..", "..")

/**
 * The samples bundled with the repository, `<repo>/examples/data`: what the
 * tests read, whatever `CTXD_DATA_DIR` says (8 tau-bench airline sessions,
 * 5 SWE-agent trajectories, the GitHub MCP catalog; `examples/README.md`).
 */
export const dataDir = (): string => join(repoRoot, "examples", "data")

/** `CTXD_DATA_DIR` when it is set and not empty: the full data set an opt-in test reads, else `undefined` (the test skips). */
export const optInDataDir = (): string | undefined => {
  const fromEnv = process.env.CTXD_DATA_DIR
  return fromEnv !== undefined && fromEnv !== "" ? fromEnv : undefined
}

/**
 * The full data set the benches read (200 tau-bench sessions, 22 SWE-agent
 * trajectories): `CTXD_DATA_DIR`, or `<repo>/../shared/data`. Throws, naming
 * `CTXD_DATA_DIR`, when that directory does not exist.
 */
export const fullDataDir = (): string => {
  const dir = optInDataDir() ?? join(repoRoot, "..", "shared", "data")
  if (!existsSync(dir))
    throw new Error(
      `the full data set is not at ${dir}: set CTXD_DATA_DIR to a directory in the layout of examples/data ` +
        `(tau-bench-airline-gpt4o.json, tau-bench-tools.json, swe-agent/*.traj, github-mcp-tools.json)`,
    )
  return dir
}

const readJson = (dir: string, ...path: Array<string>): unknown => JSON.parse(readFileSync(join(dir, ...path), "utf8"))

type Raw = Record<string, unknown>
const isRecord = (u: unknown): u is Raw => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string => (typeof u === "string" ? u : u === undefined || u === null ? "" : JSON.stringify(u))

/** Splits a conversation (without its leading system message) into turns (`AgentLogs.splitTurns`). */
export const splitTurns: <M extends { readonly role: string }>(messages: ReadonlyArray<M>) => Array<ReplayTurn<M>> = AgentLogs.splitTurns

let tauCache: { dir: string; sessions: ReadonlyArray<ReplaySession> } | undefined

/**
 * The tau-bench airline sessions (GPT-4o) of `dir` (8 bundled, 200 in the
 * full set), with the 14 airline tools, in file order. Ids are
 * `tau-airline-<task_id>-<trial>`. Cached per data directory.
 */
export const tauBenchSessions = (dir: string = dataDir()): ReadonlyArray<ReplaySession> => {
  if (tauCache?.dir === dir) return tauCache.sessions
  const tools = (readJson(dir, "tau-bench-tools.json") as { airline: Array<OpenAI.Tool> }).airline
  const sessions = AgentLogs.tauBench(readJson(dir, "tau-bench-airline-gpt4o.json") as Array<unknown>, tools, "tau-airline").map(
    (s): ReplaySession => ({ ...s, format: "openai" }),
  )
  tauCache = { dir, sessions }
  return sessions
}

/** The tau-bench session `id` (`tau-airline-<task_id>-<trial>`) of `dir` (bundled by default); throws naming the ids there are when it is not there. */
export const tauBenchSession = (id: string, dir: string = dataDir()): ReplaySession => {
  const sessions = tauBenchSessions(dir)
  const found = sessions.find((s) => s.id === id)
  if (found === undefined) throw new Error(`no tau-bench session ${id} in ${dir} (there are ${sessions.map((s) => s.id).join(", ")})`)
  return found
}

let sweCache: { dir: string; sessions: ReadonlyArray<ReplaySession> } | undefined

/**
 * The SWE-agent trajectories of `dir` (`swe-agent/*.traj`, `history`; 5
 * bundled, 22 in the full set), sorted by file name, ids = file
 * names without `.traj`. An assistant message keeps its `content` and, when
 * present, its `tool_calls`; a tool observation with `tool_call_ids` becomes
 * one `tool` message per id (same content). An observation without ids (the
 * answer to a plain-text action) becomes a `user` message, as the model saw
 * it. Tool definitions are synthesized from the calls (the files do not
 * carry them): empty for plain-text trajectories. Cached per data directory.
 */
export const sweAgentSessions = (dir: string = dataDir()): ReadonlyArray<ReplaySession> => {
  if (sweCache?.dir === dir) return sweCache.sessions
  const files = readdirSync(join(dir, "swe-agent"))
    .filter((f) => f.endsWith(".traj"))
    .sort()
  const sessions = files.map((file): ReplaySession => ({
    ...AgentLogs.sweAgent(basename(file, ".traj"), readJson(dir, "swe-agent", file)),
    format: "openai",
  }))
  sweCache = { dir, sessions }
  return sessions
}

/**
 * The GitHub MCP server's 117 tools as OpenAI tools (`inputSchema` →
 * `function.parameters`), each with its `toolset` and MCP `annotations`,
 * plus the toolset list.
 */
export const githubCatalog = (dir: string = dataDir()): GithubCatalog => {
  const raw = readJson(dir, "github-mcp-tools.json") as { toolsets: Array<Raw>; tools: Array<Raw> }
  return {
    toolsets: raw.toolsets.map((t) => ({ id: str(t.id), description: str(t.description), default: t.default === true })),
    tools: raw.tools.map((t): OpenAI.Tool => ({
      type: "function",
      function: {
        name: str(t.name),
        description: str(t.description),
        parameters: isRecord(t.inputSchema) ? t.inputSchema : { type: "object", properties: {} },
      },
      toolset: str(t.toolset),
      annotations: isRecord(t.annotations) ? t.annotations : {},
    })),
  }
}

/**
 * The session in Anthropic Messages format: tool calls become `tool_use`
 * blocks with parsed input (after the assistant's text, if any); consecutive
 * tool results become one `user` message of `tool_result` blocks; the system
 * prompt stays a string; tools take `input_schema`. User messages are kept
 * as they are (not merged with preceding tool results).
 */
export const toAnthropic = (session: ReplaySession): AnthropicReplaySession => ({
  id: session.id,
  format: "anthropic",
  system: session.system,
  tools: session.tools.map(AnthropicConvert.tool),
  turns: session.turns.map((turn) => ({ messages: AnthropicConvert.messages(turn.messages) })),
})

/**
 * The session as OpenAI Responses input: system/user/assistant messages
 * become `message` items (text content as a string), each tool call a
 * `function_call` (after the assistant's text, if any), each tool message a
 * `function_call_output`; tools become flat `function` tools.
 */
export const toResponses = (session: ReplaySession): ResponsesReplaySession => ({
  id: session.id,
  format: "openai-responses",
  system: session.system,
  tools: session.tools.map(ResponsesConvert.tool),
  turns: session.turns.map((turn) => ({ input: ResponsesConvert.items(turn.messages) })),
})

/**
 * The session as Gemini contents: user (and system) messages become `user`
 * contents with text parts (a `data:` image an `inlineData` part), assistant
 * messages `model` contents (their text, then a `functionCall` per tool
 * call, args parsed), tool messages `functionResponse` parts `{output}` in a
 * `user` content (consecutive ones merged, as Gemini wants); consecutive
 * contents of one role within a turn are merged. Call ids are kept only with
 * `ids: true` (most Gemini clients send none, so by default ctxd pairs by
 * name); tools become one `{functionDeclarations}` tool with
 * `parametersJsonSchema`.
 */
export const toGemini = (session: ReplaySession, options: { readonly ids?: boolean } = {}): GeminiReplaySession => {
  const contents = GeminiConvert.contents(options.ids === true)
  return {
    id: session.id,
    format: "gemini",
    systemInstruction: session.system,
    tools: [{ functionDeclarations: session.tools.map(GeminiConvert.declaration) }],
    turns: session.turns.map((turn) => ({ contents: contents(turn.messages) })),
  }
}

/** The format-specific part of a turn request: `format`, `tools` and the turn's messages (or items). */
export type FormatFields = Turn.TurnRequest extends infer R
  ? R extends Turn.TurnRequest
    ? Omit<R, "turnId" | "model" | "system" | "options">
    : never
  : never

/** A replayed session in one request format: a default model of that provider and each turn's format fields. */
export interface FormattedSession {
  readonly id: string
  readonly format: Turn.Format
  readonly system: string
  readonly model: Turn.Model
  readonly turns: ReadonlyArray<FormatFields>
}

/**
 * The model a replay in `format` is sent for: Claude Sonnet 5.5 (Anthropic;
 * Sonnet 4.5 reaches end of life on 2026-11-30), GPT-5.6 Terra (both OpenAI
 * formats; GPT-4o's price class, see `Samples` of the worker's replay),
 * Gemini 2.5 Flash (Gemini).
 */
export const defaultModel = (format: Turn.Format): Turn.Model =>
  format === "anthropic"
    ? { provider: "anthropic", name: "claude-sonnet-5-5" }
    : format === "gemini"
      ? { provider: "google", name: "gemini-2.5-flash" }
      : { provider: "openai", name: "gpt-5.6-terra" }

/** The request formats a session can be replayed in (demo and bench `--format`). */
export const formats: ReadonlyArray<Turn.Format> = ["anthropic", "openai", "openai-responses", "gemini"]

/** `session` (recorded in Chat Completions form) in `format`: {@link toAnthropic}, {@link toResponses}, {@link toGemini} (no call ids) or as it is. */
export const inFormat = (session: ReplaySession, format: Turn.Format): FormattedSession => {
  const base = { id: session.id, format, system: session.system, model: defaultModel(format) }
  switch (format) {
    case "anthropic": {
      const s = toAnthropic(session)
      return { ...base, turns: s.turns.map((t) => ({ format, tools: s.tools, messages: t.messages })) }
    }
    case "openai":
      return { ...base, turns: session.turns.map((t) => ({ format, tools: session.tools, messages: t.messages })) }
    case "openai-responses": {
      const s = toResponses(session)
      return { ...base, turns: s.turns.map((t) => ({ format, tools: s.tools, input: t.input })) }
    }
    case "gemini": {
      const s = toGemini(session)
      return { ...base, turns: s.turns.map((t) => ({ format, tools: s.tools, contents: t.contents })) }
    }
  }
}

/**
 * The session as a model with extended thinking would have produced it: every
 * assistant message starts with a synthetic thinking block (every third a
 * `redacted_thinking` block), signed (`signature`, `data`: opaque strings the
 * fake provider does not verify). The text is deterministic per message.
 */
export const withThinking = (session: AnthropicReplaySession): AnthropicReplaySession => {
  let n = 0
  return {
    ...session,
    turns: session.turns.map((turn) => ({
      messages: turn.messages.map((m): Anthropic.Message => {
        if (m.role !== "assistant") return m
        const k = n++
        const thought: Anthropic.ContentBlock =
          k % 3 === 2
            ? { type: "redacted_thinking", data: `EmwKAhgB${k}` }
            : {
                type: "thinking",
                thinking: `Step ${k}: check the policy, then decide which tool answers the request.`,
                signature: `sig-${session.id}-${k}`,
              }
        const content = typeof m.content === "string" ? [{ type: "text" as const, text: m.content }] : m.content
        return { role: "assistant", content: [thought, ...content] }
      }),
    })),
  }
}

/**
 * The session as a reasoning model would have produced it: a `reasoning`
 * item (empty summary, synthetic `encrypted_content`) before the first item
 * of every run of assistant output.
 */
export const withReasoning = (session: ResponsesReplaySession): ResponsesReplaySession => {
  let n = 0
  const output = (item: OpenAIResponses.Item): boolean =>
    item.type === "function_call" || item.type === "custom_tool_call" || (item.type === "message" && item.role === "assistant")
  return {
    ...session,
    turns: session.turns.map((turn) => ({
      input: turn.input.flatMap((item, i): Array<OpenAIResponses.Item> => {
        if (!output(item) || (i > 0 && output(turn.input[i - 1]!))) return [item]
        const k = n++
        return [{ type: "reasoning", id: `rs_${k}`, summary: [], encrypted_content: `gAAAA${k}` } as OpenAIResponses.Item, item]
      }),
    })),
  }
}
