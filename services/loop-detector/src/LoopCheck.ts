/**
 * `<root>.v1.loop.check`: a message history in, a loop verdict out, for
 * callers that want the detector without sending turns.
 */
import { Normalize } from "@ctxd/context"
import { type Errors, Loop, Requests } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"
import * as LoopConfig from "./LoopConfig.ts"
import * as Detector from "./Detector.ts"
import * as Nudge from "./Nudge.ts"

/** Checks one history (pure). */
export const check = (request: Loop.CheckRequest): Loop.CheckReply => {
  const messages = Normalize.fromHistory(request)
  const config = LoopConfig.make(request.config)
  const verdict = Detector.check(messages, config)
  return { ok: true, verdict, nudge: verdict.looping && config.policy === "nudge" ? Nudge.nudgeText(verdict) : null }
}

/** Answers one raw request: the verdict, or a `BadRequest` envelope. */
export const handle = (data: Uint8Array): Loop.CheckReply | Errors.ErrorReply => {
  const request = Requests.decode(Loop.CheckRequest, data, {
    what: "loop checks",
    hint: "send {format, messages, config?} (input for openai-responses, contents for gemini)",
  })
  return Either.isLeft(request) ? request.left : check(request.right)
}

/** Serves `subject` (queue group `queue`) until the scope closes. */
export const serve = (options: { readonly subject: string; readonly queue: string }) =>
  Endpoint.serve({
    subject: options.subject,
    queue: options.queue,
    maxConcurrent: 16,
    handler: ({ data }) => Effect.sync(() => handle(data)),
  })
