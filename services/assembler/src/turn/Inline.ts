/**
 * The `prompt` stage's mid-conversation system message (`MidSystem`): on a
 * model whose row has `midConversationSystem`, in a format whose adapter
 * sends such messages, what changes during a session — the memory retrieved
 * for this turn (`memoryPlacement: "tail"`), the session's learnings, a
 * changed knowledge index, the loop nudge — goes out as one system message
 * after this turn's messages, stored with them, instead of the tail notes
 * after the last breakpoint, the learnings system section and a rewritten
 * index section (the system keeps the index it was first sent with). The prefix (system, tools, every earlier
 * message) then stays the same bytes from turn to turn, and so does every
 * thinking block bound to it. Elsewhere nothing changes.
 */
import { MemoryRetrieval, MidSystem, Providers } from "@ctxd/context"
import * as Carry from "./Carry.ts"

/** True when this turn's model and format take mid-conversation system messages. */
export const applies = (inputs: Carry.Inputs): boolean =>
  inputs.prices.capabilities.midConversationSystem && Providers.of(inputs.request.format).midConversationSystem === true

/**
 * `carry` with the note appended to this turn's rows (so it is stored) and
 * to its views, and the tail memory, the learnings, the nudge and a changed
 * index taken out of where they would go otherwise. Unchanged when nothing is new, or the
 * turn does not end with a user turn (a system message may only follow one);
 * then memory and nudge stay tail notes, and the learnings are not sent.
 */
export const inline = (carry: Carry.Carry): Carry.Carry => {
  const count = Carry.section(carry, "count")
  const compaction = Carry.section(carry, "compaction")
  const loop = Carry.section(carry, "loop")
  const tools = Carry.section(carry, "tools")
  const { state, local } = carry.inputs
  // a changed knowledge index: the system keeps the one sent before, the new one is a note
  const held = tools.knowledge.ifHeld
  const index = held === undefined ? "" : tools.knowledge.sent
  const memory = carry.memory?.memory?.placement === "tail" ? carry.memory.memory : undefined
  const notes: Array<MidSystem.Note> = [
    { header: MemoryRetrieval.LEARNINGS_HEADER, text: carry.memory?.learnings?.text ?? "" },
    { header: index.split("\n")[0], text: index },
    { header: MemoryRetrieval.MEMORY_HEADER, text: memory?.text ?? "" },
    { text: loop.trailer?.text ?? "" },
  ]
  const message = MidSystem.append(
    state.messages.map((r) => r.message),
    count.fresh.map((r) => r.message),
    notes,
  )
  const systemTokens =
    held === undefined ? count.count.systemTokens : count.count.systemTokens - local.countText(index) + local.countText(held.text)
  // the system keeps its index whether or not a note goes out this turn
  const kept: Carry.Carry =
    held === undefined
      ? carry
      : {
          ...carry,
          tools: { ...tools, system: held.system, knowledge: { sent: held.text, since: held.since } },
          count: { ...count, count: { ...count.count, systemTokens } },
        }
  if (message === undefined) return kept
  const row = { seq: state.lastSeq + 1 + count.fresh.length, message, tokens: local.countMessage(message) }
  const extend = (view: Carry.CompactionOut["view"]) => ({ ...view, messages: [...view.messages, row] })
  return {
    ...kept,
    count: {
      count: { ...count.count, systemTokens, messageTokens: [...count.count.messageTokens, row.tokens] },
      fresh: [...count.fresh, row],
    },
    compaction: { ...compaction, view: extend(compaction.view), held: compaction.held === undefined ? undefined : extend(compaction.held) },
    loop: { ...loop, trailer: undefined },
    memory: carry.memory === undefined ? undefined : { ...carry.memory, memory: memory === undefined ? carry.memory.memory : undefined },
  }
}
