/**
 * NATS for tests: every test picks a fresh subject root, so tests running at
 * the same time against one server never hear each other.
 */
import { type NatsAuth, NatsClient } from "@ctxd/nats"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import type { Layer } from "effect"
import { randomBytes } from "node:crypto"

/** A fresh subject root: `t_` and 16 random hex digits, e.g. `t_3f9a0c51d2e47b68`. */
export const uniqueRoot = (): string => `t_${randomBytes(8).toString("hex")}`

/** The NATS server tests use: `NATS_URL`, default `nats://127.0.0.1:4222`. */
export const url = (): string => process.env.NATS_URL ?? "nats://127.0.0.1:4222"

/** A scoped connection to {@link url} named `name` (default `ctxd-test`). */
export const layer = (name = "ctxd-test"): Layer.Layer<NatsClient.NatsClient, NatsClient.NatsUnavailable | NatsAuth.NatsAuthError> =>
  NatsClient.layer({ servers: url().split(","), name })

/**
 * Deletes the JetStream streams a worker made under `root` (the compaction
 * work queue, `ctxd-compact-<root>`, and the object store bucket of large
 * bodies, `OBJ_ctxd-payloads-<root>`): file storage outlives a test run
 * otherwise. Errors are ignored (nothing to delete, server gone).
 */
export const dropStreams = async (root: string): Promise<void> => {
  const nc = await connect({ servers: url().split(",") }).catch(() => undefined)
  if (nc === undefined) return
  try {
    const jsm = await jetstreamManager(nc)
    const token = root.replace(/[^A-Za-z0-9_-]/g, "_")
    const ours = new Set([`ctxd-compact-${token}`, `OBJ_ctxd-payloads-${token}`])
    for await (const info of jsm.streams.list()) {
      if (ours.has(info.config.name)) await jsm.streams.delete(info.config.name)
    }
  } catch {
    // best effort
  } finally {
    await nc.close()
  }
}
