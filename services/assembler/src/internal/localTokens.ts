/**
 * A token counter with only a given local counter, for in-process turns:
 * turns counted by the caller's function (its calibration factor
 * included), every model in the counter's one encoding. Count requests,
 * usage reports and metrics are the token counter service's own endpoints,
 * never asked for by the turn shell: they fail as defects.
 */
import type { Conversation } from "@ctxd/contracts"
import { TokenCounter } from "@ctxd/token-counter"
import type { LocalCounter } from "@ctxd/tokens"
import { Effect, Layer } from "effect"
import type * as Carry from "../turn/Carry.ts"

const unused = (what: string) => Effect.dieMessage(`${what} is not available in-process`)

/** The counter over `local` (and `count` for turns) as the `TokenCounter` service. */
export const layer = (
  local: Carry.LocalCounter,
  count: (input: TokenCounter.CountTurnInput) => TokenCounter.TurnCount,
): Layer.Layer<TokenCounter.TokenCounter> => {
  const encoding = local.encoding as LocalCounter.Encoding
  const service: LocalCounter.LocalCounterService = {
    backend: "tiktoken",
    exact: false,
    encodingFor: () => encoding,
    countText: (text) => local.countText(text),
    countMessage: (message) => local.countMessage(message),
    countSystem: (sections: ReadonlyArray<Conversation.SystemSection>) => sections.reduce((n, s) => n + local.countText(s.text), 0),
    countTools: (tools) => local.countTools(tools),
    stats: () => ({ hits: 0, misses: 0, size: 0 }),
  }
  return Layer.succeed(TokenCounter.TokenCounter, {
    countTurn: (input) => Effect.sync(() => count(input)),
    countRequest: () => unused("counting a request"),
    recordUsage: () => unused("recording usage"),
    metrics: unused("the token counter's metrics"),
    local: service,
  })
}
