/**
 * The summarizer's prompts, and the post-processing that turns a bullet
 * list into a bounded one. Pure.
 */
import type { Summarize } from "@ctxd/contracts"
import * as Snapshot from "./Snapshot.ts"

const ROLE = `You compact the history of a conversation between a user and an AI agent that uses tools.
Your summary replaces the messages it covers: the agent will continue the task from your summary and the most recent messages alone.
Keep what the agent needs to carry on: the user's task, constraints and preferences; decisions taken and why; facts learned (ids, names, numbers, file paths, commands, values exactly as they appeared); what was tried and failed, with the error; the current state and the next step.
Leave out greetings, repetition and raw tool output that no longer matters. Never invent anything.`

/** The system prompt of the final call in `mode`. */
export const system = (mode: Summarize.Mode, bullets: number): string => {
  switch (mode) {
    case "one_shot":
      return `${ROLE}\nAnswer with the summary as plain prose, without a preamble.`
    case "rolling":
      return `${ROLE}\nAnswer with at most ${bullets} bullets, one per line, each starting with "- ", most important first. Fold the previous summary (if any) and the new messages into one list: merge related points, drop what is obsolete. No other text.`
    case "structured":
      return `${ROLE}\nAnswer with one JSON object and nothing else, of exactly this shape (at most ${bullets} items per list; lists may be empty):\n${Snapshot.SHAPE}`
  }
}

/** The system prompt of a chunk (a part of a span too large for one call). */
export const chunkSystem = `${ROLE}\nYou see one part of a longer span; your summary will be combined with the summaries of the other parts. Answer with a dense factual summary of this part in plain prose, without a preamble.`

/** The system prompt of the JSON repair call. */
export const repairSystem = `You fix JSON. Answer with one valid JSON object and nothing else, of exactly this shape:\n${Snapshot.SHAPE}`

const previousBlock = (previous: string | undefined): string =>
  previous === undefined || previous.trim() === "" ? "" : `<previous_summary>\n${previous.trim()}\n</previous_summary>\n\n`

/** The user prompt summarizing a transcript (optionally on top of a previous summary). */
export const spanPrompt = (transcript: string, previous: string | undefined, range: string): string =>
  `${previousBlock(previous)}<conversation messages="${range}">\n${transcript}\n</conversation>`

/** The user prompt of one chunk. */
export const chunkPrompt = (transcript: string, part: number, parts: number, range: string): string =>
  `<conversation part="${part} of ${parts}" messages="${range}">\n${transcript}\n</conversation>`

/** The user prompt combining the summaries of the parts of a span. */
export const combinePrompt = (
  parts: ReadonlyArray<{ readonly range: string; readonly text: string }>,
  previous: string | undefined,
): string =>
  `${previousBlock(previous)}The new messages were summarized in ${parts.length} consecutive parts:\n\n${parts
    .map((p, i) => `<part index="${i + 1}" messages="${p.range}">\n${p.text.trim()}\n</part>`)
    .join("\n\n")}`

/** The user prompt of the JSON repair call. */
export const repairPrompt = (invalid: string, error: string): string =>
  `This answer should have been a JSON object of the shape given, but it is not valid:\n<answer>\n${invalid}\n</answer>\n<error>\n${error}\n</error>\nAnswer with the corrected JSON object only.`

const BULLET = /^\s*(?:[-*•]|\d+[.)])\s+/

/**
 * At most `n` bullets, each `- text`: bullet lines are kept (a line that
 * continues a bullet is joined to it); when the model wrote no bullets at
 * all, each non-empty line becomes one.
 */
export const boundBullets = (text: string, n: number): string => {
  const lines = text.split("\n").map((l) => l.trimEnd())
  const hasBullets = lines.some((l) => BULLET.test(l))
  const bullets: Array<string> = []
  for (const line of lines) {
    if (line.trim() === "") continue
    if (!hasBullets || BULLET.test(line)) bullets.push(line.replace(BULLET, "").trim())
    else if (bullets.length > 0) bullets[bullets.length - 1] += ` ${line.trim()}`
  }
  return bullets
    .filter((b) => b !== "")
    .slice(0, n)
    .map((b) => `- ${b}`)
    .join("\n")
}

/**
 * The system prompt that folds a finished session into at most `n` lessons
 * for the same agent's later sessions (`ctx.v1.learn`): one short line each,
 * general rather than about this user's data, or `NONE`.
 */
export const learnSystem = (n: number): string =>
  `You review the transcript of a finished session between a user and an AI agent that uses tools, to help the same agent do better in its later sessions with other users.
Extract at most ${n} lessons: what worked, what failed and how it was fixed, a tool's pitfalls or required order of calls, a policy the agent had to respect. Each lesson is one short imperative sentence (at most 200 characters), general (no user names, ids, dates or amounts of this session), and useful on its own.
Answer with the lessons only, one per line, each starting with "- ", most useful first. If nothing is worth keeping, answer NONE.`

/** At most `n` lessons of a {@link learnSystem} answer, each one line of at most 300 characters (none for `NONE`). */
export const lessons = (answer: string, n: number): ReadonlyArray<string> =>
  boundBullets(answer, n)
    .split("\n")
    .map((line) => line.replace(/^- /, "").trim().slice(0, 300))
    .filter((line) => line !== "" && !/^none\.?$/i.test(line))
