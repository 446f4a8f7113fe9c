/**
 * A `TurnPort` over anything that runs turns and takes usage reports (the
 * NATS client of the fleet, or the engine in this process): the client's
 * request translated (`TurnRequests`), the turn asked with the request's
 * abort signal, the reply translated back; in shadow mode the reply is
 * recorded (`Shadow`), and the usage, billed for the client's own body, is
 * recorded there instead of reported as the turn's.
 */
import type { Tokens, Turn } from "@ctxd/contracts"
import type { PromptReply, PromptRequest, TurnPort, UsageReport } from "../Port.ts"
import type * as Shadow from "../Shadow.ts"
import * as TurnRequests from "../TurnRequests.ts"

/** What runs the turns. */
export interface Backend {
  readonly turn: (tenant: string, session: string, request: Turn.TurnRequest) => Promise<Turn.TurnReply>
  /** Takes a turn's billed usage; absent: not reported anywhere but the shadow record. */
  readonly usage?: ((tenant: string, session: string, report: Tokens.UsageReport) => Promise<unknown>) | undefined
  readonly ready: () => Promise<boolean>
  readonly close: () => Promise<void>
}

/** A logger of the port's own errors (never given a body or a key). */
export interface Logger {
  readonly warn: (fields: Record<string, unknown>, message: string) => void
}

export interface Options {
  /** Where shadow replies and their usage go; absent: shadow replies are only returned. */
  readonly shadow?: Shadow.Recorder | undefined
  readonly logger?: Logger | undefined
}

/** Rejects when `signal` aborts (the gateway's timeout): the turn goes on, its answer is not waited for. */
const abortable = <A>(promise: Promise<A>, signal: AbortSignal): Promise<A> => {
  if (signal.aborted) return Promise.reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"))
  return new Promise<A>((resolve, reject) => {
    const onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"))
    signal.addEventListener("abort", onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort)
        reject(error instanceof Error ? error : new Error(String(error)))
      },
    )
  })
}

/** Only what `usage` reads: provider usage objects carry nothing else of interest. */
const usageOf = (usage: Record<string, unknown>): Tokens.UsageReport["usage"] => usage as Tokens.UsageReport["usage"]

/** Shadowed turns remembered for their usage report (a report need not say its mode). */
const SHADOW_TURNS = 10_000

export const make = (backend: Backend, options: Options = {}): TurnPort => {
  const shadowed = new Set<string>()
  // turns answered with the client's own body: their usage is nobody's turn
  const declined = new Set<string>()
  const remember = (set: Set<string>, turnId: string) => {
    set.add(turnId)
    if (set.size > SHADOW_TURNS) set.delete(set.values().next().value!)
  }
  /** The client's own body as the reply: the gateway lays it over itself, so the request goes as sent. */
  const passThrough = (request: PromptRequest): PromptReply => {
    const turnId = `${TurnRequests.turnIdOf(request)}-declined`
    remember(declined, turnId)
    // no turn ran, so there is no report; nothing downstream of the port reads one
    return { body: { ...request.body }, headers: {}, turnId, report: {} as Turn.Report }
  }
  const prompt = async (request: PromptRequest, signal: AbortSignal): Promise<PromptReply> => {
    const options_ = request.agent === undefined ? undefined : { agent: request.agent }
    let fields: ReturnType<typeof TurnRequests.toTurn>
    try {
      fields = TurnRequests.toTurn(request, options_)
    } catch (error) {
      if (!(error instanceof TurnRequests.Declined)) throw error
      return passThrough(request)
    }
    const turn = { ...fields, turnId: TurnRequests.turnIdOf(request) } as unknown as Turn.TurnRequest
    const reply = await abortable(backend.turn(request.key.tenant, request.key.session, turn), signal)
    const out = TurnRequests.toReply(request, reply)
    if (request.mode === "shadow") {
      try {
        options.shadow?.prompted(request, out)
      } catch (error) {
        // the record is ctxd's own bookkeeping: the client's request goes on whatever it meets
        options.logger?.warn(
          { tenant: request.key.tenant, session: request.key.session, error: (error as Error).message },
          "shadow record not made",
        )
      }
      remember(shadowed, out.turnId)
    }
    return out
  }
  const usage = (report: UsageReport): void => {
    if (declined.delete(report.turnId)) return
    if (report.mode === "shadow" || shadowed.delete(report.turnId)) {
      options.shadow?.billed(report)
      return
    }
    const report_: Tokens.UsageReport = { turnId: report.turnId, usage: usageOf(report.usage) }
    backend
      .usage?.(report.key.tenant, report.key.session, report_)
      .catch((error: unknown) =>
        options.logger?.warn(
          { tenant: report.key.tenant, session: report.key.session, turnId: report.turnId, error: (error as Error).message },
          "usage report not taken",
        ),
      )
  }
  return { prompt, usage, ready: () => backend.ready().catch(() => false), close: () => backend.close() }
}
