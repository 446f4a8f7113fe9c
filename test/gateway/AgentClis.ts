/**
 * The real agent CLIs the gateway is tried with: which npm package and
 * version, where they are installed, and how each one is pointed at a base
 * URL and driven without a terminal (see docs/agent-clis.md).
 *
 * They are not in the repo's lockfile: `test/gateway/install-clis.ts`
 * installs the pinned versions into {@link cliDir} (default
 * `node_modules/.cache/ctxd-agent-clis`, or `CTXD_AGENT_CLIS`), and the
 * tests skip a CLI that is not there. Each run gets a throwaway HOME and
 * workspace, so nothing of the user's own config is read or written.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

export type Cli = "claude" | "codex" | "gemini"

export const CLIS: ReadonlyArray<Cli> = ["claude", "codex", "gemini"]

/** The npm package and the version the findings were made with. */
export const PACKAGES: Readonly<Record<Cli, { readonly name: string; readonly version: string }>> = {
  claude: { name: "@anthropic-ai/claude-code", version: "2.1.197" },
  codex: { name: "@openai/codex", version: "0.171.0" },
  gemini: { name: "@google/gemini-cli", version: "0.61.0" },
}

const REPO = Path.resolve(import.meta.dirname, "../..")

/** Where the CLIs are installed (`CTXD_AGENT_CLIS`, else under the repo's node_modules cache). */
export const cliDir = (): string => process.env["CTXD_AGENT_CLIS"] ?? Path.join(REPO, "node_modules", ".cache", "ctxd-agent-clis")

/** The installed executable of `cli`, or `undefined` when it is not installed. */
export const binary = (cli: Cli): string | undefined => {
  const bin = Path.join(cliDir(), "node_modules", ".bin", cli)
  return Fs.existsSync(bin) ? bin : undefined
}

/** A run's scripted task: the tool the CLI's model calls (by the CLI's own tool name) and what it answers. */
export interface Script {
  /** The CLI's file-reading tool and its input for `a.txt` in `workspace`. */
  readonly tool: (workspace: string) => { readonly name: string; readonly input: Record<string, unknown> }
}

export const SCRIPTS: Readonly<Record<Cli, Script>> = {
  // Claude Code's Read takes an absolute path
  claude: { tool: (workspace) => ({ name: "Read", input: { file_path: Path.join(workspace, "a.txt") } }) },
  // Codex runs shell commands (exec_command, in its read-only sandbox)
  codex: { tool: () => ({ name: "exec_command", input: { cmd: "cat a.txt" } }) },
  gemini: { tool: () => ({ name: "read_file", input: { file_path: "a.txt" } }) },
}

/** What one run needs: its directories and the fake keys (never real ones). */
export interface Setup {
  readonly home: string
  readonly workspace: string
  /** The provider's base URL as each CLI wants it (no `/v1`; Codex's gets it added). */
  readonly baseUrl: string
  readonly task: string
  /** Gemini's model (`-m`); `undefined`: its automatic choice (a routing call first). */
  readonly geminiModel: string | undefined
  /** Codex's `request_max_retries` and `stream_max_retries` (the others retry on their own by default). */
  readonly codexRetries: number
}

/** The arguments, environment and files of a non-interactive run of `cli`. */
export const invocation = (
  cli: Cli,
  s: Setup,
): { readonly args: ReadonlyArray<string>; readonly env: Record<string, string>; readonly files: Record<string, string> } => {
  const base = { HOME: s.home, PATH: process.env["PATH"] ?? "/usr/bin:/bin", LANG: "C.UTF-8", NO_COLOR: "1" }
  switch (cli) {
    case "claude":
      return {
        args: ["-p", s.task, "--output-format", "json"],
        env: { ...base, ANTHROPIC_BASE_URL: s.baseUrl, ANTHROPIC_API_KEY: "sk-ant-fake-cli-key-0001", DISABLE_TELEMETRY: "1" },
        files: {},
      }
    case "codex": {
      const codexHome = Path.join(s.home, ".codex")
      // OPENAI_BASE_URL is not read for the built-in provider: a provider of its own, plain HTTP + SSE
      const config = [
        'model = "gpt-5.6"',
        'model_provider = "ctxd"',
        "[model_providers.ctxd]",
        'name = "ctxd"',
        `base_url = "${s.baseUrl}/v1"`,
        'env_key = "CTXD_CODEX_KEY"',
        'wire_api = "responses"',
        `request_max_retries = ${s.codexRetries}`,
        // a streamed call (all of Codex's) is retried under stream_max_retries
        `stream_max_retries = ${s.codexRetries}`,
      ].join("\n")
      return {
        args: ["exec", "--skip-git-repo-check", s.task],
        env: { ...base, CODEX_HOME: codexHome, CTXD_CODEX_KEY: "sk-fake-cli-key-0002" },
        files: { [Path.join(codexHome, "config.toml")]: `${config}\n` },
      }
    }
    case "gemini": {
      const settings = {
        security: { auth: { selectedType: "gemini-api-key" } },
        general: { disableAutoUpdate: true },
        privacy: { usageStatisticsEnabled: false },
        telemetry: { enabled: false },
      }
      return {
        args: ["-p", s.task, ...(s.geminiModel === undefined ? [] : ["-m", s.geminiModel])],
        env: {
          ...base,
          GOOGLE_GEMINI_BASE_URL: s.baseUrl,
          GEMINI_API_KEY: "fake-gemini-cli-key-0003",
          GEMINI_CLI_TRUST_WORKSPACE: "true",
        },
        files: { [Path.join(s.home, ".gemini", "settings.json")]: JSON.stringify(settings) },
      }
    }
  }
}
