/**
 * Count requests for Anthropic's `count_tokens`, one per segment (tools,
 * system, a turn's new messages), rendered the way `@ctxd/context`'s
 * Anthropic renderer renders the real request (tools sorted by name as
 * `{name, description, input_schema}`, system sections as text blocks,
 * `tool` messages as `user` messages of `tool_result` blocks, runs of one
 * role merged with results first, blank text dropped, opaque blocks passed
 * through or noted), so the segment counts add up to the count of the body
 * ctxd sends.
 *
 * A segment alone is not always a valid request: messages must start with
 * `user`, tool blocks need a tool definition, every `tool_result` needs its
 * `tool_use` just before. Each count request therefore carries a fixed
 * envelope (a `"."` user message, a `"."` assistant message, a stub tool)
 * whose cost is measured once per model (the baselines) and subtracted.
 */
import * as Reasoning from "../../Reasoning.ts"
import * as RenderAnthropic from "./Render.ts"
import type { Conversation } from "@ctxd/contracts"

type Block = Record<string, unknown>

/** A message of a count request. */
export interface CountMessage {
  readonly role: "user" | "assistant"
  readonly content: ReadonlyArray<Block>
}

/** The body of one `count_tokens` call (without `model`). */
export interface CountBody {
  readonly system?: ReadonlyArray<Block>
  readonly tools?: ReadonlyArray<Block>
  readonly messages: ReadonlyArray<CountMessage>
}

/**
 * The envelopes whose cost is measured once per model:
 * - `plain`: one `"."` user message (the prefix of tools and system counts);
 * - `stubUser`: the stub tool and one `"."` user message (before a batch that starts with an assistant message);
 * - `stubUserAssistant`: the stub tool, `"."` user, `"."` assistant (before a batch that starts with a user message).
 */
export type Envelope = "plain" | "stubUser" | "stubUserAssistant"

export const envelopes: ReadonlyArray<Envelope> = ["plain", "stubUser", "stubUserAssistant"]

const DOT_USER: CountMessage = { role: "user", content: [{ type: "text", text: "." }] }
const DOT_ASSISTANT: CountMessage = { role: "assistant", content: [{ type: "text", text: "." }] }

/** A tool definition that lets a batch carry tool blocks; measured in the `stub*` baselines. */
export const STUB_TOOL: Block = { name: "ctxd_count", input_schema: { type: "object" } }

const EMPTY = "(empty)"

/** The count request of an envelope alone. */
export const envelopeBody = (envelope: Envelope): CountBody =>
  envelope === "plain"
    ? { messages: [DOT_USER] }
    : { tools: [STUB_TOOL], messages: envelope === "stubUser" ? [DOT_USER] : [DOT_USER, DOT_ASSISTANT] }

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const isBlank = (text: string): boolean => text.trim() === ""

/** Tool definitions as the renderer sends them: sorted by name, `{name, description?, input_schema}`. */
export const tools = (defs: ReadonlyArray<Conversation.Tool>): Array<Block> =>
  [...defs]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((t) => {
      const block: Block = { name: t.name }
      if (t.description !== undefined) block["description"] = t.description
      block["input_schema"] = isRecord(t.inputSchema) ? t.inputSchema : { type: "object", properties: {} }
      return block
    })

/** System sections as text blocks (blank ones dropped, as the renderer does). */
export const system = (sections: ReadonlyArray<Conversation.SystemSection>): Array<Block> =>
  sections.filter((s) => !isBlank(s.text)).map((s) => ({ type: "text", text: s.text }))

/** The count request of the tools block alone (inside the `plain` envelope). */
export const toolsBody = (defs: ReadonlyArray<Conversation.Tool>): CountBody => ({ tools: tools(defs), messages: [DOT_USER] })

/** The count request of the system block alone (inside the `plain` envelope). */
export const systemBody = (sections: ReadonlyArray<Conversation.SystemSection>): CountBody => ({
  system: system(sections),
  messages: [DOT_USER],
})

const opaqueType = (part: Conversation.OpaquePart): string =>
  isRecord(part.block) && typeof part.block["type"] === "string" ? part.block["type"] : "unknown"

const opaqueBlock = (part: Conversation.OpaquePart): Block | undefined => {
  const type = opaqueType(part)
  if (part.format === "anthropic") {
    if (type === "tool_use" || type === "tool_result" || !isRecord(part.block)) return undefined
    const { cache_control: _drop, ...rest } = part.block
    return rest
  }
  if (type === "refusal" && isRecord(part.block) && typeof part.block["refusal"] === "string") {
    return isBlank(part.block["refusal"]) ? undefined : { type: "text", text: part.block["refusal"] }
  }
  return { type: "text", text: `[${part.format} ${type} block omitted]` }
}

const resultText = (block: Block): string => {
  const content = Array.isArray(block["content"]) ? (block["content"] as Array<Block>) : []
  const text = content.flatMap((c) => (c["type"] === "text" ? [String(c["text"])] : [])).join("\n")
  return isBlank(text) ? EMPTY : text
}

interface Draft {
  readonly role: "user" | "assistant"
  results: Array<Block>
  others: Array<Block>
}

/** A turn's new messages as a count request. */
export interface Batch {
  readonly body: CountBody
  /** The envelope whose baseline is subtracted from the count. */
  readonly envelope: Envelope
  /**
   * True when the batch had to be changed beyond the renderer's own rules to
   * form a valid request: a tool result whose call is in an older message, or
   * a call whose result is not in the batch, is counted as a text block.
   */
  readonly approximate: boolean
}

/**
 * The batch of a turn's new messages: pinned `system` messages go to the
 * request's `system`, the rest are merged by role; tool blocks that are not
 * paired inside the batch become text blocks (see {@link Batch}).
 */
export const batch = (messages: ReadonlyArray<Conversation.Message>): Batch => {
  const pinned: Array<Block> = []
  const drafts: Array<Draft> = []
  const used = new Set<string>()
  let ids = new Map<string, string>()
  for (const message of messages) {
    if (message.role === "system") {
      for (const p of message.parts) if (p.type === "text" && !isBlank(p.text)) pinned.push({ type: "text", text: p.text })
      continue
    }
    if (message.role === "assistant") ids = RenderAnthropic.uniqueCallIds(message, used)
    const role = message.role === "assistant" ? "assistant" : "user"
    let draft = drafts.at(-1)
    if (draft === undefined || draft.role !== role) {
      draft = { role, results: [], others: [] }
      drafts.push(draft)
    }
    for (const p of message.parts) {
      switch (p.type) {
        case "text":
          if (!isBlank(p.text)) draft.others.push({ type: "text", text: p.text })
          break
        case "image":
          draft.others.push(RenderAnthropic.image(p))
          break
        case "tool_call":
          draft.others.push({ type: "tool_use", id: ids.get(p.id) ?? p.id, name: p.name, input: isRecord(p.input) ? p.input : {} })
          break
        case "tool_result":
          draft.results.push(RenderAnthropic.resultBlock(p, ids))
          break
        case "opaque": {
          // thinking only from the assistant, as the renderer sends it
          if (role === "user" && Reasoning.isReasoning(p)) break
          const block = opaqueBlock(p)
          if (block !== undefined) draft.others.push(block)
          break
        }
      }
    }
  }

  // Pair tool blocks inside the batch; anything unpaired is counted as text.
  let approximate = false
  drafts.forEach((draft, i) => {
    if (draft.role === "user") {
      const prev = drafts[i - 1]
      const offered = new Set(prev?.others.flatMap((b) => (b["type"] === "tool_use" ? [b["id"]] : [])) ?? [])
      const kept = draft.results.filter((b) => offered.has(b["tool_use_id"]))
      if (kept.length < draft.results.length) {
        approximate = true
        const orphans = draft.results.filter((b) => !offered.has(b["tool_use_id"]))
        draft.others = [...orphans.map((b) => ({ type: "text", text: resultText(b) })), ...draft.others]
        draft.results = kept
      }
      return
    }
    const next = drafts[i + 1]
    const answered = new Set(next?.results.map((b) => b["tool_use_id"]) ?? [])
    draft.others = draft.others.map((b) => {
      if (b["type"] !== "tool_use" || answered.has(b["id"])) return b
      approximate = true
      return { type: "text", text: `${String(b["name"])} ${JSON.stringify(b["input"])}` }
    })
  })

  const rendered: Array<CountMessage> = drafts.map((d) => {
    const content = d.results.length === 0 ? d.others : [...d.results, ...d.others]
    return { role: d.role, content: content.length === 0 ? [{ type: "text", text: EMPTY }] : content }
  })
  const last = rendered.at(-1)
  if (last?.role === "assistant") {
    // the API rejects a final assistant message ending in whitespace
    const tail = last.content.at(-1)
    if (tail !== undefined && tail["type"] === "text" && typeof tail["text"] === "string" && /\s$/.test(tail["text"])) {
      const text = tail["text"].trimEnd()
      rendered[rendered.length - 1] = {
        role: "assistant",
        content: [...last.content.slice(0, -1), { type: "text", text: text === "" ? EMPTY : text }],
      }
    }
  }

  const envelope: Envelope = rendered[0]?.role === "user" ? "stubUserAssistant" : "stubUser"
  const prefix = envelope === "stubUser" ? [DOT_USER] : [DOT_USER, DOT_ASSISTANT]
  const body: CountBody = {
    ...(pinned.length > 0 ? { system: pinned } : {}),
    tools: [STUB_TOOL],
    messages: [...prefix, ...rendered],
  }
  return { body, envelope, approximate }
}
