/**
 * Loads real sessions (tau-bench, SWE-agent) as provider-neutral messages,
 * from the samples bundled in `examples/data` (`Workloads.dataDir`) unless
 * given another data directory of that layout.
 *
 * SWE-agent trajectories come in two shapes: function calling (`tool_calls`
 * on the assistant, `tool` observations with `tool_call_ids`), and plain-text
 * actions, where the assistant's `action` string is the command and the next
 * observation (a `user` or `tool` message) is its output. A plain-text action
 * becomes a call named `shell` with `{command: action}`, and its observation
 * the matching tool result.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import type { Conversation } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"

export interface Session {
  readonly id: string
  readonly messages: ReadonlyArray<Conversation.Message>
}

interface OpenAIToolCall {
  readonly id: string
  readonly function: { readonly name: string; readonly arguments: string }
}

interface RawMessage {
  readonly role: string
  readonly content?: string | null
  readonly tool_calls?: ReadonlyArray<OpenAIToolCall> | null
  readonly tool_call_id?: string
  readonly tool_call_ids?: ReadonlyArray<string> | null
  readonly action?: string
}

const text = (value: string | null | undefined): Array<Conversation.Part> =>
  value === null || value === undefined || value === "" ? [] : [{ type: "text", text: value }]

const parseArgs = (raw: string): unknown => {
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

const toolCall = (c: OpenAIToolCall): Conversation.ToolCallPart => ({
  type: "tool_call",
  id: c.id,
  name: c.function.name,
  input: parseArgs(c.function.arguments),
  arguments: c.function.arguments,
})

const toolResult = (callId: string, content: string | null | undefined): Conversation.Message => ({
  role: "tool",
  parts: [{ type: "tool_result", callId, content: text(content) as Array<Conversation.TextPart>, isError: false }],
})

/** The tau-bench airline sessions (OpenAI chat format under `traj`). */
export const tauBench = (dataDir: string = Workloads.dataDir()): ReadonlyArray<Session> => {
  const raw = JSON.parse(readFileSync(join(dataDir, "tau-bench-airline-gpt4o.json"), "utf8")) as ReadonlyArray<{
    readonly task_id: number
    readonly trial: number
    readonly traj: ReadonlyArray<RawMessage>
  }>
  return raw.map((s, n) => ({
    id: `tau-bench#${n} (task ${s.task_id}, trial ${s.trial})`,
    messages: s.traj.map((m): Conversation.Message => {
      switch (m.role) {
        case "tool":
          return toolResult(m.tool_call_id ?? "", m.content)
        case "assistant":
          return { role: "assistant", parts: [...text(m.content), ...(m.tool_calls ?? []).map(toolCall)] }
        case "system":
          return { role: "system", parts: text(m.content) }
        default:
          return { role: "user", parts: text(m.content) }
      }
    }),
  }))
}

/** The SWE-agent trajectories (`history` of each `swe-agent/*.traj`), by file name. */
export const sweAgent = (dataDir: string = Workloads.dataDir()): ReadonlyArray<Session> =>
  readdirSync(join(dataDir, "swe-agent"))
    .filter((f) => f.endsWith(".traj"))
    .sort()
    .map((file) => {
      const { history } = JSON.parse(readFileSync(join(dataDir, "swe-agent", file), "utf8")) as {
        readonly history: ReadonlyArray<RawMessage>
      }
      const messages: Array<Conversation.Message> = []
      let pendingShell: string | undefined
      history.forEach((m, i) => {
        if (m.role === "assistant") {
          const calls = m.tool_calls ?? []
          pendingShell = calls.length === 0 && m.action !== undefined && m.action !== "" ? `shell-${i}` : undefined
          const shell: Array<Conversation.Part> =
            pendingShell === undefined ? [] : [{ type: "tool_call", id: pendingShell, name: "shell", input: { command: m.action } }]
          messages.push({ role: "assistant", parts: [...text(m.content), ...calls.map(toolCall), ...shell] })
        } else if ((m.role === "user" || m.role === "tool") && pendingShell !== undefined) {
          messages.push(toolResult(pendingShell, m.content))
          pendingShell = undefined
        } else if (m.role === "tool") {
          const ids = m.tool_call_ids ?? []
          messages.push({
            role: "tool",
            parts: ids.flatMap((id) => toolResult(id, m.content).parts),
          })
        } else {
          messages.push({ role: m.role === "system" ? "system" : "user", parts: text(m.content) })
        }
      })
      return { id: `swe-agent/${file}`, messages }
    })
