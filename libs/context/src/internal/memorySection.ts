import type { Input } from "./stages.ts"

/** The id of the system section retrieved memory goes in under `placement: "system"`. */
export const MEMORY_SECTION_ID = "ctxd-memory"

/**
 * Memory placed in the prefix (`placement: "system"`) becomes the last
 * system section (not cached itself: it changes every turn, and so does all
 * that follows it); `tail` memory goes to the renderer as it is.
 */
export const withMemorySection = (input: Input): Input => {
  const memory = input.memory
  if (memory === undefined || memory.placement !== "system" || memory.text === "") return input
  return { ...input, system: [...input.system, { id: MEMORY_SECTION_ID, text: memory.text, cache: "none" }] }
}
