/**
 * The port to a worker fleet over NATS: `@ctxd/client`'s `ContextClient`
 * (its retries, sticky routing, large bodies, prefix refs) sends each turn
 * to `<root>.v1.turn.<tenant>.<session>` and each billed usage to
 * `<root>.v1.usage.<tenant>.<session>`. The gateway holds no session state:
 * run as many as you like in front of one fleet.
 *
 * Readiness: a `health` request answered within the client's timeout by a
 * worker (any worker of the fleet) that reaches its database.
 */
import { ContextClient } from "@ctxd/client"
import type { TurnPort } from "../Port.ts"
import * as Backed from "./Backed.ts"

/** What the port needs of a `ContextClient.PromiseClient`. */
export type Client = Pick<ContextClient.PromiseClient, "turn" | "usage" | "health" | "close">

/** The port over a connected client (closed with the port). */
export const make = (client: Client, options: Backed.Options = {}): TurnPort =>
  Backed.make(
    {
      turn: (tenant, session, request) => client.turn(tenant, session, request),
      usage: (tenant, session, report) => client.usage(tenant, session, report),
      ready: async () => {
        const health = await client.health()
        // a worker without its database cannot commit a turn
        return health.postgres
      },
      close: () => client.close(),
    },
    options,
  )

/** Connects to NATS (`ContextClient.connect`'s options) and returns the port; rejects when NATS cannot be reached. */
export const connect = async (connectOptions: ContextClient.ConnectOptions, options: Backed.Options = {}): Promise<TurnPort> =>
  make(await ContextClient.connect({ name: "ctxd-gateway", ...connectOptions }), options)
