/**
 * Stage `count`: the tokens of the system sections, the tools and each new
 * message, from the token counter (the provider's count where configured,
 * cached by content, behind its circuit breaker; else local BPE). Needs I/O:
 * asks the shell for the count, then turns the new messages into the rows
 * to store.
 */
import { ToolSearch } from "@ctxd/context"
import * as Carry from "./Carry.ts"

export const stage: Carry.Stage = {
  name: "count",
  run: (carry) => {
    const { tenant, request, options, state } = carry.inputs
    const tools = Carry.section(carry, "tools")
    const count = carry.answers.count
    if (count === undefined) {
      return Carry.need({
        _tag: "Count",
        input: {
          tenant,
          model: request.model,
          backend: options.tokenBackend,
          format: request.format,
          system: tools.system,
          // deferred tools are not in the prompt until a search loads them
          tools: ToolSearch.loaded(tools.sent),
          messages: tools.messages,
        },
      })
    }
    const fresh = tools.messages.map((message, i) => ({ seq: state.lastSeq + 1 + i, message, tokens: count.messageTokens[i]! }))
    return Carry.next({ ...carry, count: { count, fresh } })
  },
}
