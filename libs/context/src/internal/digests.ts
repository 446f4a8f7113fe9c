/** Digests of a prompt's system and tools, to tell from one turn to the next whether either changed (cached per array). */
import type { Conversation } from "@ctxd/contracts"
import { createHash } from "node:crypto"

/** The digest of the system sections, once per sections array (a turn's attempts share it). */
const systemKeys = new WeakMap<ReadonlyArray<Conversation.SystemSection>, string>()
export const systemKeyOf = (system: ReadonlyArray<Conversation.SystemSection>): string => {
  let key = systemKeys.get(system)
  if (key === undefined) {
    key = digest(system.map((x) => x.text))
    systemKeys.set(system, key)
  }
  return key
}

/** The digest of the tools sent, once per tools array and compression (the compressed tools of a turn's attempts are shared). */
const toolsKeys = new WeakMap<ReadonlyArray<Conversation.Tool>, Map<string, string>>()
export const toolsKeyOf = (tools: ReadonlyArray<Conversation.Tool>, compression: string, tokens: number): string => {
  let byCompression = toolsKeys.get(tools)
  if (byCompression === undefined) toolsKeys.set(tools, (byCompression = new Map<string, string>()))
  const id = `${compression}\u0000${tokens}`
  let key = byCompression.get(id)
  if (key === undefined) {
    key = digest([compression, ...tools.map((t) => t.name)], tokens)
    byCompression.set(id, key)
  }
  return key
}

/** A short digest of texts (and a number), to tell whether the system or the tools changed. */
const digest = (texts: ReadonlyArray<string>, extra = 0): string => {
  const hash = createHash("sha1")
  for (const t of texts) hash.update(t).update("\u0000")
  return `${hash.digest("hex").slice(0, 16)}:${extra}`
}
