/**
 * A provider's cache diagnostics in neutral form: where the prompt diverged
 * from the previous response's, as the provider saw it. Each adapter with
 * diagnostics reads its own shape (`anthropic/Diagnostics.ts`,
 * `openai-responses/Diagnostics.ts`); {@link read} tries each.
 */
import * as AnthropicDiagnostics from "./anthropic/Diagnostics.ts"
import type { Diagnosis, Reader } from "./Diagnosis.ts"
import * as ResponsesDiagnostics from "./openai-responses/Diagnostics.ts"

export type { Diagnosis, Divergence, Reader } from "./Diagnosis.ts"

const readers: ReadonlyArray<Reader> = [AnthropicDiagnostics.reader, ResponsesDiagnostics.reader]

/** The diagnosis in a provider's diagnostics object as its response carried it (undefined: none or unreadable). */
export const read = (value: unknown): Diagnosis | undefined => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  const record = value as Readonly<Record<string, unknown>>
  return readers.find((r) => r.matches(record))?.read(record)
}
