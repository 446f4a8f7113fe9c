/**
 * Which BPE vocabulary approximates a model's tokenizer.
 *
 * - `o200k_base`: OpenAI's current vocabulary (gpt-4o, gpt-4.1, gpt-4.5,
 *   gpt-5, gpt-oss, chatgpt-4o, the o1 / o3 / o4 reasoning models).
 * - `cl100k_base`: everything else: older OpenAI models (gpt-4, gpt-3.5) and,
 *   as an approximation, Claude and any model we do not know (Anthropic's own
 *   tokenizer is not public; cl100k is the usual stand-in and errs a little low
 *   on code, which drift calibration corrects).
 * - `heuristic`: no vocabulary, about four characters per token.
 */

/** A tokenizer vocabulary, or the character heuristic. */
export type Encoding = "o200k_base" | "cl100k_base" | "heuristic"

/** Every encoding, in a stable order. */
export const encodings: ReadonlyArray<Encoding> = ["o200k_base", "cl100k_base", "heuristic"]

/** True for a string naming one of the {@link Encoding}s. */
export const isEncoding = (value: string): value is Encoding => value === "o200k_base" || value === "cl100k_base" || value === "heuristic"

// A family name followed by the end, a dash, a dot or a colon: "gpt-4o-mini",
// "gpt-5.1", "o3-pro", but not "o10" or "gpt-4-turbo".
const O200K = /^(?:gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|chatgpt-4o|o1|o3|o4)(?:$|[-.:@_])/

/**
 * The vocabulary for a model, decided by its name alone (the provider does not
 * matter: `gpt-4o` served by Azure or a gateway is still `gpt-4o`). Names are
 * compared case-insensitively after stripping a gateway prefix
 * (`openai/gpt-4o`) and a fine-tune prefix (`ft:gpt-4o-mini:org::id`).
 * Unknown models get `cl100k_base`.
 */
export const encodingFor = (model: { readonly provider: string; readonly name: string }): Encoding => {
  let name = model.name.trim().toLowerCase()
  const slash = name.lastIndexOf("/")
  if (slash >= 0) name = name.slice(slash + 1)
  if (name.startsWith("ft:")) name = name.slice(3)
  return O200K.test(name) ? "o200k_base" : "cl100k_base"
}
