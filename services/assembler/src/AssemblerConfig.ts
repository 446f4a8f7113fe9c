/**
 * The assembler's knobs (the worker reads them from the environment,
 * docs/configuration.md). {@link defaults} is the one place their defaults live.
 */
import type { RuntimeConfig } from "@ctxd/config"
import { CostModel } from "@ctxd/context"
import type { Loop, Turn } from "@ctxd/contracts"
import { FlowControl } from "@ctxd/nats"
import { Context, Layer } from "effect"
import * as Prefixes from "./Prefixes.ts"

/**
 * The defaults: 1,000 sessions and 500,000 messages kept in memory (LRU),
 * 64 turns of one session waiting behind the running one before `Busy`
 * (`FlowControl.defaults`, which also derives the depth), the
 * built-in price table (`CostModel.builtIn`), 64 MiB of distinct `system`
 * and `tools` JSON cached by content hash (`Prefixes`).
 */
export const defaults = {
  maxSessions: 1_000,
  maxMessages: 500_000,
  mailbox: FlowControl.defaults.mailbox,
  prices: CostModel.builtIn,
  prefixCacheBytes: Prefixes.defaults.bytes,
} as const

export interface Config {
  /** Sessions kept in memory. */
  readonly maxSessions: number
  /** Messages kept in memory over all sessions. */
  readonly maxMessages: number
  /** Turns of one session that may wait behind the running one before `Busy`. */
  readonly mailbox: number
  /**
   * Bytes of distinct `system` and `tools` JSON kept decoded and normalized
   * by content hash (`Prefixes`), which `{ref}` requests name; 0: none (every
   * part is decoded per turn, every ref is unknown).
   */
  readonly prefixCacheBytes: number
  /** The environment's turn options, under the config file's, a tenant's, an agent's and a request's own (see `turn/Options`). */
  readonly defaults: Turn.Options
  /** Loop-detector defaults (a tenant's and a request's `options.loop` win field by field). */
  readonly loop: Loop.Settings
  /**
   * The config file's current sections (`defaults`, `tenants`, `agents`): read
   * once per turn, so a reloaded file applies from the next turn.
   */
  readonly sections: () => RuntimeConfig.Sections
  /** Toolsets sent from the start when neither the tenant nor the request names them. */
  readonly defaultToolsets: ReadonlyArray<string>
  /** The model prices the cache planner weighs edits with (configured rows over the built-in table). */
  readonly prices: CostModel.PriceTable
}

const none: RuntimeConfig.Sections = { defaults: {}, tenants: {}, agents: {} }
/** No config file. */
export const noSections = (): RuntimeConfig.Sections => none

/** `config` with its sections read now and fixed: one turn sees one snapshot throughout. */
export const pinned = (config: Config): Config => {
  const sections = config.sections()
  return { ...config, sections: () => sections }
}

export class AssemblerConfig extends Context.Tag("@ctxd/assembler/AssemblerConfig")<AssemblerConfig, Config>() {}

/** The config of explicit values over {@link defaults}: no option defaults, no config file, no default toolsets unless given. */
export const make = (config: Partial<Config> = {}): Config => ({
  ...defaults,
  defaults: {},
  loop: {},
  sections: noSections,
  defaultToolsets: [],
  ...config,
})

/** The config from explicit values over {@link defaults} (tests, embedding, the worker). */
export const layer = (config: Partial<Config> = {}): Layer.Layer<AssemblerConfig> => Layer.succeed(AssemblerConfig, make(config))
