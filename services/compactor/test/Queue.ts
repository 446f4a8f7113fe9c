/** Work queue settings and helpers shared by the queue tests and the crash-test process. */
import { NatsClient } from "@ctxd/nats"
import { jetstreamManager } from "@nats-io/jetstream"
import { Effect } from "effect"
import { type Settings, WorkQueue } from "../src/index.ts"

/** Short ack wait, memory storage. */
export const QUEUE: Settings.QueueSettings = {
  stream: "",
  consumer: "ctxd-compactor",
  ackWaitMs: 2_000,
  maxDeliver: 20,
  duplicateWindowMs: 60_000,
  maxAgeMs: 600_000,
  concurrency: 2,
  storage: "memory",
}

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
