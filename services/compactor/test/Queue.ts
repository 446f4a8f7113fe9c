/** Work queue config and helpers shared by the queue tests and the crash-test process. */
import { NatsClient } from "@ctxd/nats"
import { jetstreamManager } from "@nats-io/jetstream"
import { Effect } from "effect"
import { type CompactorConfig, WorkQueue } from "../src/index.ts"

/**
 * Short ack wait, memory storage. The ack wait still leaves room for the
 * event loop stalls of a loaded 2-core machine (the in-progress beat comes
 * every third of it).
 */
export const QUEUE: CompactorConfig.QueueConfig = {
  stream: "",
  consumer: "ctxd-compactor",
  ackWaitMs: 5_000,
  maxDeliver: 20,
  duplicateWindowMs: 60_000,
  maxAgeMs: 600_000,
  concurrency: 2,
  storage: "memory",
}

/**
 * The crash test's victim process: a lease short enough to wait out, long
 * enough to outlive a stall of up to two seconds (it is renewed every
 * third of it); one job at a time, so that a redelivery of its own job
 * (after a stall longer than the ack wait) can never make it take the
 * session's lease a second time.
 */
export const VICTIM = { queue: { ...QUEUE, concurrency: 1 }, leaseTtlMs: 3_000 } as const

/** Jobs stored in the stream (work-queue retention: acked jobs are gone). */
export const pending = (options: WorkQueue.QueueOptions) =>
  Effect.flatMap(NatsClient.NatsClient, ({ connection }) =>
    Effect.promise(async () => (await (await jetstreamManager(connection)).streams.info(WorkQueue.streamName(options))).state.messages),
  )

/** Deletes the test's stream when the scope closes. */
export const cleanup = (options: WorkQueue.QueueOptions) =>
  Effect.flatMap(NatsClient.NatsClient, ({ connection }) =>
    Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const jsm = await jetstreamManager(connection)
        await jsm.streams.delete(WorkQueue.streamName(options)).catch(() => false)
      }),
    ),
  )
