/**
 * The structured snapshot: parsing the model's JSON (validated with the
 * `Summarize.Snapshot` schema) and rendering it as the text that rides in
 * the conversation. Pure.
 */
import { Summarize } from "@ctxd/contracts"
import { Data, Either, ParseResult, Schema } from "effect"

/** The model's answer is not a valid snapshot. */
export class InvalidSnapshot extends Data.TaggedError("InvalidSnapshot")<{ readonly message: string }> {}

const decode = Schema.decodeUnknownEither(Summarize.Snapshot)

/**
 * The JSON object inside a model answer: a fenced ```json block when there
 * is one, else the text from the first `{` to the last `}`.
 */
export const extractJson = (text: string): string => {
  const fenced = /```(?:json)?\s*\n([\s\S]*?)```/i.exec(text)
  const body = fenced?.[1] ?? text
  const start = body.indexOf("{")
  const end = body.lastIndexOf("}")
  return start >= 0 && end > start ? body.slice(start, end + 1) : body.trim()
}

/** Parses and validates a model answer as a {@link Summarize.Snapshot}. */
export const parse = (text: string): Either.Either<Summarize.Snapshot, InvalidSnapshot> => {
  let json: unknown
  try {
    json = JSON.parse(extractJson(text))
  } catch (error) {
    return Either.left(new InvalidSnapshot({ message: `not JSON: ${error instanceof Error ? error.message : String(error)}` }))
  }
  return Either.mapLeft(decode(json), (e) => new InvalidSnapshot({ message: ParseResult.TreeFormatter.formatErrorSync(e) }))
}

/** Keeps at most `n` items of every list (the model was asked for that; this makes it a bound). */
export const bound = (snapshot: Summarize.Snapshot, n: number): Summarize.Snapshot => ({
  currentTask: { ...snapshot.currentTask, nextSteps: snapshot.currentTask.nextSteps.slice(0, n) },
  keyFindings: snapshot.keyFindings.slice(0, n),
  activeHypotheses: snapshot.activeHypotheses.slice(0, n),
  entities: snapshot.entities.slice(0, n),
  relations: snapshot.relations.slice(0, n),
  userPreferences: snapshot.userPreferences.slice(0, n),
  openQuestions: snapshot.openQuestions.slice(0, n),
})

const section = (title: string, items: ReadonlyArray<string>): Array<string> =>
  items.length === 0 ? [] : [`${title}:`, ...items.map((i) => `- ${i}`)]

/** The snapshot as text: task first, then the lists that have items, in a fixed order. */
export const render = (snapshot: Summarize.Snapshot): string => {
  const task = snapshot.currentTask
  const lines = [
    `Current task: ${task.description}`,
    `State: ${task.state}`,
    ...section("Next steps", task.nextSteps),
    ...section("Key findings", snapshot.keyFindings),
    ...section("Active hypotheses", snapshot.activeHypotheses),
    ...section(
      "Entities",
      snapshot.entities.map(
        (e) => `${e.name}${e.type === undefined ? "" : ` (${e.type})`}${e.description === undefined ? "" : `: ${e.description}`}`,
      ),
    ),
    ...section(
      "Relations",
      snapshot.relations.map((r) => `${r.from} —${r.relation}→ ${r.to}`),
    ),
    ...section("User preferences", snapshot.userPreferences),
    ...section("Open questions", snapshot.openQuestions),
  ]
  return lines.join("\n")
}

/** The JSON shape the model is asked for, as shown in the prompt. */
export const SHAPE = `{
  "currentTask": {"description": string, "state": string, "nextSteps": [string]},
  "keyFindings": [string],
  "activeHypotheses": [string],
  "entities": [{"name": string, "type": string, "description": string}],
  "relations": [{"from": string, "relation": string, "to": string}],
  "userPreferences": [string],
  "openQuestions": [string]
}`
