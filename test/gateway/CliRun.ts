/**
 * One non-interactive run of an agent CLI in a throwaway HOME and
 * workspace (a file `a.txt` holding a fresh nonce), against a base URL
 * (the fake provider, or the gateway in front of it), with the scripted
 * model replies queued on the fake: a call of the CLI's file-reading tool,
 * then a final text naming the nonce. The CLI really runs its tool: the
 * nonce can only reach the model's next request through it.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { FakeProvider } from "@ctxd/testing"
import { binary, type Cli, invocation, SCRIPTS } from "./AgentClis.ts"

export interface RunOptions {
  /** Where the CLI sends its model calls. */
  readonly baseUrl: string
  /** The fake provider upstream, to script the replies on. */
  readonly fake: FakeProvider.FakeProviderServer
  /** Default 90 s: the process group is killed past it. */
  readonly timeoutMs?: number
  /** Default `gemini-2.5-flash`; `null`: Gemini CLI's automatic choice (its routing call first). */
  readonly geminiModel?: string | null
  /** Codex's `request_max_retries` and `stream_max_retries`; default 0. */
  readonly codexRetries?: number
  /** Answer the CLI's first main-loop call (one offering its tool) with a 429 and this `retry-after`. */
  readonly rateLimitMs?: number
}

export interface RunResult {
  readonly cli: Cli
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
  /** What `a.txt` held: only the tool's output carries it to the model. */
  readonly nonce: string
  /** The final text the script makes the model say. */
  readonly answer: string
  readonly workspace: string
}

const TASK = "Read the file a.txt and tell me what it says."

/** Queues the tool call and the final answer, both only for requests offering the tool (side calls get the default). */
const script = (fake: FakeProvider.FakeProviderServer, cli: Cli, workspace: string, answer: string, rateLimitMs?: number): void => {
  const tool = SCRIPTS[cli].tool(workspace)
  const limited = rateLimitMs === undefined ? [] : [{ whenTool: tool.name, error: { status: 429, retryAfterMs: rateLimitMs } }]
  fake.control({
    replies: [
      ...limited,
      { whenTool: tool.name, toolCalls: [{ id: `call_${randomBytes(4).toString("hex")}`, name: tool.name, input: tool.input }] },
      { whenTool: tool.name, text: answer },
    ],
  })
}

/** Runs `cli` once; throws when it is not installed. */
export const run = async (cli: Cli, options: RunOptions): Promise<RunResult> => {
  const bin = binary(cli)
  if (bin === undefined) throw new Error(`${cli} is not installed: run node test/gateway/install-clis.ts`)
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), `ctxd-cli-${cli}-`))
  const home = Path.join(root, "home")
  const workspace = Path.join(root, "work")
  Fs.mkdirSync(home)
  Fs.mkdirSync(workspace)
  const nonce = `nonce-${randomBytes(6).toString("hex")}`
  Fs.writeFileSync(Path.join(workspace, "a.txt"), `${nonce}\n`)
  const answer = `The file says ${nonce}.`
  const call = invocation(cli, {
    home,
    workspace,
    baseUrl: options.baseUrl,
    task: TASK,
    geminiModel: options.geminiModel === null ? undefined : (options.geminiModel ?? "gemini-2.5-flash"),
    codexRetries: options.codexRetries ?? 0,
  })
  for (const [file, text] of Object.entries(call.files)) {
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, text)
  }
  script(options.fake, cli, workspace, answer, options.rateLimitMs)
  const started = Date.now()
  try {
    const out = await spawnBounded(bin, call.args, call.env, workspace, options.timeoutMs ?? 90_000)
    return { cli, ...out, ms: Date.now() - started, nonce, answer, workspace }
  } finally {
    Fs.rmSync(root, { recursive: true, force: true })
  }
}

const spawnBounded = (
  bin: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  cwd: string,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve, reject) => {
    // its own process group, so a timeout ends the CLI's children (its tool commands) too
    const child = spawn(bin, [...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout.on("data", (c: Buffer) => out.push(c))
    child.stderr.on("data", (c: Buffer) => err.push(c))
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
    }, timeoutMs)
    child.once("error", (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") })
    })
  })
