/**
 * Stage `tools`: what the model may call this turn. The knowledge index
 * joins the system sections (with `load_knowledge`; a changed index is held
 * back by `prompt` until the prefix is re-written anyway); on-demand toolsets are
 * rebuilt from the history once per session and `load_toolset` /
 * `load_knowledge` / `recall` calls in the new messages are answered by ctxd
 * itself (their results are stored like any other); the tools to send are
 * selected in cache-stable order; tools sent and called are recorded for
 * waste detection.
 *
 * Memory tools (`MemoryTools`): offered as the toolset `memory` among the
 * default toolsets when `options.memoryTools` is true, or, unset, when the
 * agent/user has any memory (`inputs.memoryAny`). A memory call in the new
 * messages needs the store: the stage asks for it (`Need` `Memory`) and,
 * answered, renders each result within the memory budget.
 *
 * `recall` (restorable masking) is offered from the first prompt that masks
 * a tool result on and then for the rest of the session, so the tool list
 * changes once, in the turn whose prefix masking changes anyway: this stage
 * prepares the tool list with `recall` ({@link Carry.RecallOffer}) and the
 * `prompt` stage switches to it when it masks. A worker that takes the
 * session over rebuilds the flag from the stored history (`Recall.replay`).
 */
import { Knowledge, Masking, MemoryTools, Proactive, Providers, Recall, ToolSearch, Toolsets, Waste } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import * as Carry from "./Carry.ts"

/**
 * The tool list sent last per request tool list (the prefix cache keeps that
 * one the same object turn after turn) and selection: a selection of the
 * same tools is that array again, so what is cached by it downstream (the
 * compressed schemas and their count, the planner's tools key) answers from
 * memory.
 */
const lastSent = new WeakMap<ReadonlyArray<Conversation.Tool>, Map<string, ReadonlyArray<Conversation.Tool>>>()
const stable = (
  key: ReadonlyArray<Conversation.Tool>,
  variant: string,
  sent: ReadonlyArray<Conversation.Tool>,
): ReadonlyArray<Conversation.Tool> => {
  let byVariant = lastSent.get(key)
  if (byVariant === undefined) lastSent.set(key, (byVariant = new Map<string, ReadonlyArray<Conversation.Tool>>()))
  const last = byVariant.get(variant)
  if (last !== undefined && last.length === sent.length && last.every((t, i) => t === sent[i])) return last
  byVariant.set(variant, sent)
  return sent
}

export const stage: Carry.Stage = {
  name: "tools",
  run: (carry) => {
    const { normalized, state, knowledge, options, local } = carry.inputs
    const pipeline = options.pipeline
    const recallOn = Recall.enabled(normalized.tools, pipeline)
    const maxTokens = pipeline.maskBatchTokens ?? Masking.defaults.batchTokens
    const memoryOn = options.memoryTools ?? carry.inputs.memoryAny === true
    const tools = memoryOn
      ? [...normalized.tools, ...MemoryTools.tools.filter((t) => !normalized.tools.some((own) => own.name === t.name))]
      : normalized.tools
    const config: Toolsets.Config = memoryOn
      ? { ...options.toolsets, defaultToolsets: [...options.toolsets.defaultToolsets, MemoryTools.TOOLSET] }
      : options.toolsets
    const context: Toolsets.Context = {
      tools,
      config,
      ...(knowledge.length === 0 ? {} : { knowledge }),
      ...(recallOn ? { recall: { history: state.messages, maxTokens, countText: local.countText } } : {}),
    }
    const index = Knowledge.section(knowledge)
    const loaded =
      state.toolsets ??
      Toolsets.replay(
        state.messages.map((m) => m.message),
        context,
      )
    const incoming = normalized.messages.map((n) => n.message)
    // the provider's tool search where the format and the model have it: nothing to load, the tool list stays put
    const search = carry.inputs.prices.capabilities.toolSearch ? Providers.of(carry.inputs.request.format).toolSearch : undefined
    // memory calls: run by the shell; memory_remember only with the write tools loaded (before or in these
    // messages) or, under tool search, sent deferred: the model found it by searching, its way of loading it
    const memory = MemoryTools.called(incoming)
      ? MemoryTools.pending(
          incoming,
          memoryOn &&
            (config.includeWriteByDefault === true ||
              search !== undefined ||
              Toolsets.answerVirtualCalls(incoming, loaded, context).state.loaded.some(
                (l) => l.toolset === MemoryTools.TOOLSET && l.write,
              )),
          normalized.tools,
        )
      : MemoryTools.none
    if (memory.calls.length > 0 && carry.answers.memory === undefined) return Carry.need({ _tag: "Memory", calls: memory.calls })
    const answers = new Map(memory.answers)
    for (const call of memory.calls) {
      const result = carry.answers.memory?.get(call.callId) ?? { op: "error" as const, message: "the memory store did not answer" }
      answers.set(call.callId, MemoryTools.render(result, local.countText))
    }
    const answered = Toolsets.answerVirtualCalls(incoming, loaded, { ...context, memory: { answers } })
    const offered =
      recallOn &&
      (state.recall ??
        Recall.replay(state.messages, {
          keep: pipeline.maskKeep ?? Proactive.DEFAULT_KEEP,
          batchTokens: maxTokens,
          minTokens: pipeline.maskMinTokens ?? Masking.defaults.minTokens,
        }))
    const base = knowledge.length === 0 ? [] : [Knowledge.tool]
    const select = (virtual: ReadonlyArray<Conversation.Tool>) => {
      const sent = stable(
        normalized.tools,
        virtual.map((t) => t.name).join("\u0000") + (search === undefined ? "" : "\u0000search"),
        search === undefined
          ? Toolsets.selectTools(tools, answered.state, config, virtual)
          : ToolSearch.select(tools, config, search, virtual),
      )
      const prompt = ToolSearch.loaded(sent)
      return { sent, waste: Waste.record(state.waste, prompt, answered.messages, (tool) => local.countTools([tool])) }
    }
    const chosen = select(offered ? [...base, Recall.tool] : base)
    const withIndex = (text: string) =>
      text === "" ? normalized.system : [...normalized.system, { id: Knowledge.SECTION_ID, text, cache: "5m" as const }]
    const current = index?.text ?? ""
    const previous = state.knowledgeIndex
    return Carry.next({
      ...carry,
      tools: {
        system: withIndex(current),
        knowledge: {
          sent: current,
          ifHeld:
            previous === undefined || previous.sent === current
              ? undefined
              : { text: previous.sent, system: withIndex(previous.sent), since: previous.since ?? carry.inputs.now },
        },
        sent: chosen.sent,
        messages: answered.messages,
        virtualCalls: answered.calls,
        toolsets: answered.state,
        waste: chosen.waste,
        recall: recallOn && !offered ? { offered, ifMasked: select([...base, Recall.tool]) } : { offered },
      },
    })
  },
}
