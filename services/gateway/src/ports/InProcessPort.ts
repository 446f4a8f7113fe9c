/**
 * The port that runs turns in this process: the worker's own turn shell
 * (`InProcessTurns`: decode → session actor → gather → the turn engine →
 * commit) over the in-memory session store, counting with the local
 * tokenizer of each model's family. What `ctxd gateway` uses when no NATS
 * answers: the one-command trial runs the engine the fleet runs, and its
 * sessions live as long as the process.
 *
 * One engine per token encoding (a session keeps its model's family, so
 * its stored counts stay in one encoding). Usage reports are not taken:
 * calibration is the fleet's (the shadow record still gets them).
 */
import { type AssemblerConfig, InProcessTurns } from "@ctxd/assembler"
import { CacheBlocks } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import type { TurnPort } from "../Port.ts"
import * as Backed from "./Backed.ts"

export interface Options extends Backed.Options {
  /** The engine's settings over `AssemblerConfig.defaults` (e.g. its option defaults and tenant sections). */
  readonly config?: Partial<AssemblerConfig.Config> | undefined
}

export const make = (options: Options = {}): TurnPort => {
  const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 200_000 })
  const engines = new Map<string, InProcessTurns.InProcessTurns>()
  let closed = false
  const engineFor = (model: Turn.Model): InProcessTurns.InProcessTurns => {
    const count = CacheBlocks.counting(counter, model)
    let engine = engines.get(count.encoding)
    if (engine === undefined) {
      const local = {
        encoding: count.encoding,
        countText: count.text,
        countTools: count.tools,
        countMessage: count.message,
        countSystem: count.system,
      }
      engine = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) }, options.config ?? {})
      engines.set(count.encoding, engine)
    }
    return engine
  }
  return Backed.make(
    {
      turn: async (tenant, session, request) => {
        if (closed) throw new Error("the in-process port is closed")
        return engineFor(request.model).turn(tenant, session, request)
      },
      ready: () => Promise.resolve(!closed),
      close: async () => {
        closed = true
        await Promise.all([...engines.values()].map((e) => e.dispose()))
        engines.clear()
      },
    },
    options,
  )
}
