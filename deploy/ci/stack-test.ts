// Checks a running docker-compose stack (NATS, Postgres, two workers) from
// the host, the way a service would use it: plain NATS requests on the wire
// contract. Run by deploy/ci/containers.sh:
//
//   COMPOSE_PROJECT_NAME=… NATS_URL=nats://127.0.0.1:14222 node deploy/ci/stack-test.ts
//
// 1. a turn through the stack (every session answered, bodies right);
// 2. a worker container killed (`docker kill`): its sessions are answered by
//    the other worker;
// 3. a worker's process crashes (SIGKILL from the host): `restart: on-failure`
//    brings the container back and it rejoins;
// 4. a rolling restart (`docker restart`, one worker at a time, each waits
//    for the fleet to be whole again) under steady traffic: no turn is lost
//    or doubled (every session's body holds each of its user messages once,
//    in order).
// Prints one line per check and "N passed, N failed"; writes the counts to
// $CTXD_CI_STACK_RESULTS; exits 1 when a check failed.
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { execFile } from "node:child_process"
import { writeFileSync } from "node:fs"
import { promisify } from "node:util"

const execFileAsync = promisify(execFile)

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`${name} is not set`)
  return value
}
const DOCKER = env("DOCKER", "docker")
const PROJECT = env("COMPOSE_PROJECT_NAME")
const NATS_URL = env("NATS_URL")
const ROOT = env("CTXD_SUBJECT_ROOT", "ctx")
const SHARDS = Number(env("CTXD_SHARDS", "256"))
const TENANT = "ci"
const SESSIONS = 12

const started = Date.now()
const log = (text: string): void => console.log(`[stack-test +${((Date.now() - started) / 1000).toFixed(1)}s] ${text}`)
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const docker = async (...args: Array<string>): Promise<string> => (await execFileAsync(DOCKER, args, { timeout: 120_000 })).stdout.trim()

/** The running worker containers of the stack. */
const workerContainers = async (): Promise<Array<string>> =>
  (
    await docker(
      "ps",
      "-q",
      "--filter",
      `label=com.docker.compose.project=${PROJECT}`,
      "--filter",
      "label=com.docker.compose.service=worker",
    )
  )
    .split("\n")
    .filter((line) => line.length > 0)

const inspect = async (container: string, format: string): Promise<string> => docker("inspect", "-f", format, container)

/** A worker's id starts with its hostname, which is its container's short id. */
const hostnameOf = (container: string): Promise<string> => inspect(container, "{{.Config.Hostname}}")

interface Health {
  readonly ok: boolean
  readonly worker: string
  readonly postgres: boolean
  readonly draining: boolean
  readonly shards?: number
}

/** Every worker that answers `<root>.v1.health` within a second. */
const fleet = async (nc: NatsConnection): Promise<Array<Health>> => {
  const replies: Array<Health> = []
  try {
    const iterator = await nc.requestMany(`${ROOT}.v1.health`, "", { maxWait: 1_000, strategy: "timer" })
    for await (const message of iterator) {
      try {
        const health = message.json<Health>()
        if (health.ok) replies.push(health)
      } catch {
        // not a health reply
      }
    }
  } catch {
    // no responders: nobody is up
  }
  return replies
}

const waitUntil = async <A>(what: string, timeoutMs: number, probe: () => Promise<A | undefined>): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(500)
  }
}

/**
 * Waits until `count` workers answer, each reaching Postgres, none draining,
 * each owning shards and all shards owned; `hostnames`, when given, must each
 * have a worker (and `exclude`d worker ids none).
 */
const waitForFleet = (
  nc: NatsConnection,
  what: string,
  options: { readonly count: number; readonly hostnames?: ReadonlyArray<string>; readonly exclude?: ReadonlyArray<string> },
): Promise<Array<Health>> =>
  waitUntil(what, 120_000, async () => {
    const workers = await fleet(nc)
    const whole =
      workers.length === options.count &&
      workers.every((w) => w.postgres && !w.draining && (w.shards ?? 1) > 0) &&
      workers.reduce((sum, w) => sum + (w.shards ?? SHARDS / options.count), 0) === SHARDS &&
      (options.hostnames ?? []).every((h) => workers.some((w) => w.worker.startsWith(`${h}-`))) &&
      workers.every((w) => !(options.exclude ?? []).includes(w.worker))
    return whole ? workers : undefined
  })

// --- turns ---------------------------------------------------------------

const RETRYABLE = new Set(["Unavailable", "NotOwner", "Busy"])

interface Answer {
  /** The provider-ready request body. */
  readonly request: { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }> }
  readonly worker: string
  readonly attempts: number
}

const userText = (session: string, turn: number) => `${session} u${turn}`

/**
 * Sends turn `turn` of `session` (the previous turn's assistant answer and a
 * new user message) and retries what a client retries (no responders,
 * timeouts, Unavailable / NotOwner / Busy) with the same turnId, for up to
 * `retryForMs`.
 */
const sendTurn = async (nc: NatsConnection, session: string, turn: number, retryForMs = 90_000): Promise<Answer> => {
  const request = {
    turnId: `${session}-t${turn}`,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    system: "You are the ctxd CI stack test.",
    options: { windowMessages: 5_000, windowStep: 1_000, freshTailMessages: 5_000 },
    messages: [
      ...(turn === 0 ? [] : [{ role: "assistant", content: `${session} a${turn - 1}` }]),
      { role: "user", content: userText(session, turn) },
    ],
  }
  const deadline = Date.now() + retryForMs
  let last = ""
  for (let attempt = 1; ; attempt++) {
    try {
      const message = await nc.request(`${ROOT}.v1.turn.${TENANT}.${session}`, JSON.stringify(request), { timeout: 10_000 })
      const reply = message.json<{ ok: boolean; request?: Answer["request"]; error?: { code: string; message: string } }>()
      if (reply.ok && reply.request !== undefined)
        return { request: reply.request, worker: message.headers?.get("ctxd-worker") ?? "", attempts: attempt }
      const code = reply.error?.code ?? "?"
      if (!RETRYABLE.has(code)) throw new Error(`turn ${request.turnId}: ${code}: ${reply.error?.message}`)
      last = code
    } catch (error) {
      if (error instanceof Error && error.message.startsWith(`turn ${request.turnId}:`)) throw error
      last = error instanceof Error ? error.message : String(error)
    }
    if (Date.now() > deadline) throw new Error(`turn ${request.turnId} not answered within ${retryForMs} ms (last: ${last})`)
    await sleep(Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)))
  }
}

/** The session's user messages in the body, in order. */
const usersIn = (answer: Answer): Array<string> =>
  answer.request.messages.filter((m) => m.role === "user" && typeof m.content === "string").map((m) => m.content as string)

const expectHistory = (session: string, answer: Answer, turns: number): void => {
  const expected = Array.from({ length: turns }, (_, i) => userText(session, i))
  const got = usersIn(answer)
  if (JSON.stringify(got) !== JSON.stringify(expected)) {
    throw new Error(`${session}: the body's user messages are ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`)
  }
}

const sessionName = (i: number) => `s${i}`
const allSessions = Array.from({ length: SESSIONS }, (_, i) => sessionName(i))

// --- the checks ----------------------------------------------------------

const checks: Array<{ readonly name: string; readonly run: (nc: NatsConnection) => Promise<void> }> = []
const check = (name: string, run: (nc: NatsConnection) => Promise<void>) => checks.push({ name, run })

/** Turns each session has had so far. */
const turnsOf = new Map<string, number>(allSessions.map((s) => [s, 0]))
/** The worker that answered each session's last turn. */
const ownerOf = new Map<string, string>()

/** One more turn for every session, at once; checks every body. */
const roundOfTurns = async (nc: NatsConnection): Promise<Array<Answer>> =>
  Promise.all(
    allSessions.map(async (session) => {
      const turn = turnsOf.get(session) ?? 0
      const answer = await sendTurn(nc, session, turn)
      turnsOf.set(session, turn + 1)
      ownerOf.set(session, answer.worker)
      expectHistory(session, answer, turn + 1)
      return answer
    }),
  )

check("a turn through the stack", async (nc) => {
  await waitForFleet(nc, "two workers owning every shard", { count: 2 })
  await roundOfTurns(nc)
  const workers = new Set(ownerOf.values())
  log(`  ${SESSIONS} sessions answered by ${workers.size} worker(s): ${[...workers].join(", ")}`)
})

check("a killed worker container: the other answers its sessions", async (nc) => {
  const containers = await workerContainers()
  if (containers.length !== 2) throw new Error(`expected 2 worker containers, found ${containers.length}`)
  const hostnames = await Promise.all(containers.map(hostnameOf))
  // the container that owns the most of the sessions
  const owned = hostnames.map((h) => [...ownerOf.values()].filter((w) => w.startsWith(`${h}-`)).length)
  const victim = owned[0]! >= owned[1]! ? 0 : 1
  const victimHost = hostnames[victim]!
  const survivorHost = hostnames[1 - victim]!
  log(`  docker kill ${victimHost} (answered ${owned[victim]} of ${SESSIONS} sessions)`)
  await docker("kill", containers[victim]!)
  const answers = await roundOfTurns(nc)
  const strays = answers.filter((a) => !a.worker.startsWith(`${survivorHost}-`))
  if (strays.length > 0)
    throw new Error(`${strays.length} turn(s) answered by ${strays.map((a) => a.worker).join(", ")}, not by ${survivorHost}`)
  log(
    `  all ${SESSIONS} sessions answered by ${survivorHost} (most retries for one turn: ${Math.max(...answers.map((a) => a.attempts)) - 1})`,
  )
  await docker("start", containers[victim]!)
  await waitForFleet(nc, "the killed worker back in the fleet", { count: 2, hostnames })
})

check("a crashed worker is restarted by restart: on-failure", async (nc) => {
  const containers = await workerContainers()
  const container = containers[0]!
  const hostname = await hostnameOf(container)
  const before = Number(await inspect(container, "{{.RestartCount}}"))
  const pid = Number(await inspect(container, "{{.State.Pid}}"))
  const oldWorkers = (await fleet(nc)).filter((w) => w.worker.startsWith(`${hostname}-`)).map((w) => w.worker)
  log(`  SIGKILL to the worker process of ${hostname} (host pid ${pid})`)
  process.kill(pid, "SIGKILL")
  await waitUntil("the container to be restarted", 60_000, async () => {
    const [count, running] = (await inspect(container, "{{.RestartCount}} {{.State.Running}}")).split(" ")
    return Number(count) > before && running === "true" ? true : undefined
  })
  await waitForFleet(nc, "the restarted worker in the fleet", { count: 2, hostnames: [hostname], exclude: oldWorkers })
  await roundOfTurns(nc)
  log(`  restarted (RestartCount ${before} -> ${await inspect(container, "{{.RestartCount}}")}), rejoined, all sessions answered`)
})

check("a rolling restart loses no turn", async (nc) => {
  const containers = await workerContainers()
  const hostnames = await Promise.all(containers.map(hostnameOf))
  let stop = false
  let sent = 0
  const failures: Array<string> = []
  // every session: one turn after another, paced, until the restarts are done
  const traffic = Promise.all(
    allSessions.map(async (session) => {
      while (!stop) {
        const turn = turnsOf.get(session) ?? 0
        try {
          const answer = await sendTurn(nc, session, turn)
          turnsOf.set(session, turn + 1)
          sent++
          expectHistory(session, answer, turn + 1)
        } catch (error) {
          failures.push(error instanceof Error ? error.message : String(error))
          return
        }
        await sleep(250)
      }
    }),
  )
  try {
    for (const [i, container] of containers.entries()) {
      const oldWorkers = (await fleet(nc)).filter((w) => w.worker.startsWith(`${hostnames[i]}-`)).map((w) => w.worker)
      log(`  docker restart ${hostnames[i]}`)
      await docker("restart", "-t", "30", container)
      await waitForFleet(nc, `${hostnames[i]} back in the fleet`, { count: 2, hostnames, exclude: oldWorkers })
      await sleep(1_000)
    }
  } finally {
    stop = true
    await traffic
  }
  if (failures.length > 0)
    throw new Error(`${failures.length} turn(s) failed during the rolling restart: ${failures.slice(0, 3).join("; ")}`)
  // one more turn each: the whole history is there, each message once
  await roundOfTurns(nc)
  log(
    `  ${sent} turns during the restarts, every session's history whole (${[...turnsOf.values()].reduce((a, b) => a + b, 0)} turns in all)`,
  )
})

// --- run -----------------------------------------------------------------

const main = async () => {
  const nc = await waitUntil(`NATS at ${NATS_URL}`, 60_000, () =>
    connect({ servers: NATS_URL, name: "ctxd-stack-test", timeout: 2_000 }).catch(() => undefined),
  )
  let passed = 0
  let failed = 0
  for (const { name, run } of checks) {
    const t0 = Date.now()
    try {
      await run(nc)
      passed++
      log(`✓ ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`)
    } catch (error) {
      failed++
      log(`✗ ${name}: ${error instanceof Error ? error.message : String(error)}`)
      break // later checks build on this one's state
    }
  }
  const skipped = checks.length - passed - failed
  await nc.drain()
  console.log(`stack: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`)
  if (process.env.CTXD_CI_STACK_RESULTS) writeFileSync(process.env.CTXD_CI_STACK_RESULTS, JSON.stringify({ passed, failed, skipped }))
  process.exitCode = failed > 0 ? 1 : 0
}

await main()
