/**
 * Stage `validate`: the new messages must fit the stored history — a tool
 * result answers a known, still open call (a `BadRequest` naming the message
 * otherwise; or, when the turn was stored already, its stored reply) — and a
 * new session's first turn must carry at least one message with content (the
 * providers reject an empty conversation or an empty first message), and reasoning the provider would
 * refuse once sent back (a thinking block without its signature, a reasoning item without the item it
 * led to) is a `BadRequest` naming its path. A `system` naming a workspace bundle the
 * shell did not read (an embedding without a `WorkspaceCache`) is refused.
 */
import { Normalize, Providers, Reasoning } from "@ctxd/context"
import { Turn } from "@ctxd/contracts"
import * as Carry from "./Carry.ts"

export const stage: Carry.Stage = {
  name: "validate",
  run: (carry) => {
    const { state, normalized } = carry.inputs
    // the request's own field: Responses requests carry `input` items, Gemini requests `contents`
    const field = Providers.of(carry.inputs.request.format).historyField
    if (Turn.isWorkspaceRef(carry.inputs.request.system) && carry.inputs.workspace === undefined) {
      return { _tag: "Rejected", message: "workspace bundles are not available here", path: "system.workspace", pairing: false }
    }
    // reasoning the provider would refuse once sent back: refused now, before anything is stored
    const format = carry.inputs.request.format
    const bad = Reasoning.inputProblem(format, (carry.inputs.request as unknown as Record<string, unknown>)[field], field)
    if (bad !== undefined) return { _tag: "Rejected", message: `${bad.path}: ${bad.message}`, path: bad.path, pairing: false }
    if (state.lastSeq === 0 && !normalized.messages.some((m) => Normalize.hasContent(m.message))) {
      return {
        _tag: "Rejected",
        message: "the first turn of a session must carry at least one message with content",
        path: field,
        pairing: false,
      }
    }
    const pairing = Normalize.findPairingError(state.callIds, state.answered, normalized.messages, field)
    if (pairing === undefined) return Carry.next(carry)
    return { _tag: "Rejected", message: pairing.message, path: `${field}[${pairing.sourceIndex}]`, pairing: true }
  },
}
