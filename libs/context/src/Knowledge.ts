/**
 * On-demand knowledge: documents registered per tenant/agent (stored
 * elsewhere) are not put in the prompt. The prompt carries a compact index
 * (one line per document) as a system section, and the model reads a
 * document by calling the virtual `load_knowledge(id)` tool, which ctxd
 * answers itself (see `Toolsets.answerVirtualCalls`) with the document's text.
 *
 * Cache-aware: the tool's schema never changes (the id is a free string, not
 * an enum of the current ids), so registering a document only changes the
 * index section, and the index is sorted by id so it changes only where a
 * document was added or removed.
 */
import type { Conversation } from "@ctxd/contracts"
import { collapse } from "./SchemaCompression.ts"

/** A registered document. */
export interface Doc {
  /** Stable id the model passes to `load_knowledge`. */
  readonly id: string
  /** One line saying what it holds (shown in the index). */
  readonly title: string
  /** The full text, returned when loaded. */
  readonly text: string
}

/** Name of the virtual tool. */
export const LOAD_KNOWLEDGE = "load_knowledge"

/** Id of the index system section. */
export const SECTION_ID = "ctxd-knowledge"

/** Index lines are cut to this many characters. */
export const TITLE_CHARS = 120

/**
 * The virtual `load_knowledge(id)` tool; the same object every time (stable
 * schema); `extra.ctxd = "virtual"` keeps it out of schema compression.
 */
export const tool: Conversation.Tool = {
  name: LOAD_KNOWLEDGE,
  description:
    "Load a document of the knowledge base by its id (listed in the knowledge index of the system prompt). Returns the document's full text.",
  inputSchema: {
    type: "object",
    properties: { id: { type: "string", description: "The document id, as listed in the knowledge index" } },
    required: ["id"],
  },
  extra: { ctxd: "virtual" },
}

const line = (doc: Doc): string => {
  const title = collapse(doc.title)
  const cut = title.length > TITLE_CHARS ? `${title.slice(0, TITLE_CHARS - 1)}…` : title
  return `- ${doc.id}: ${cut}`
}

const byId = (docs: ReadonlyArray<Doc>): Array<Doc> => [...docs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))

/**
 * The compact index: a header line, then `- id: title` per document, sorted
 * by id, titles collapsed to one line of at most {@link TITLE_CHARS}
 * characters. Empty string for no documents.
 */
export const index = (docs: ReadonlyArray<Doc>): string =>
  docs.length === 0 ? "" : [`Knowledge base (call ${LOAD_KNOWLEDGE} with an id to read a document):`, ...byId(docs).map(line)].join("\n")

/**
 * The index as a system section (`id` {@link SECTION_ID}, cache `5m`), or
 * `undefined` without documents. Put it after the caller's own sections:
 * it changes whenever a document is registered or removed.
 */
export const section = (docs: ReadonlyArray<Doc>): Conversation.SystemSection | undefined =>
  docs.length === 0 ? undefined : { id: SECTION_ID, text: index(docs), cache: "5m" }

/** The answer to one `load_knowledge` call. */
export interface Answer {
  readonly ok: boolean
  /** The tool result text: the document, or an error listing the ids. */
  readonly text: string
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Answers `load_knowledge(args)`: the document with `args.id` (its title as
 * a first line, then its text), or an error that lists the available ids
 * and titles (also when `args.id` is missing or not a string).
 */
export const answer = (args: unknown, docs: ReadonlyArray<Doc>): Answer => {
  const id = isRecord(args) ? args["id"] : undefined
  const doc = typeof id === "string" ? docs.find((d) => d.id === id) : undefined
  if (doc !== undefined) return { ok: true, text: `# ${collapse(doc.title)} (${doc.id})\n\n${doc.text}` }
  const what = typeof id === "string" ? `No document with id ${JSON.stringify(id)}.` : `Missing argument "id" (a string).`
  const available = docs.length === 0 ? "The knowledge base is empty." : `Available documents:\n${byId(docs).map(line).join("\n")}`
  return { ok: false, text: `Error: ${what} ${available}` }
}
