/**
 * Text heuristics the fold needs: does a tool result read as a failure, does
 * a message report a context overflow. Only the head of a text is looked at,
 * so the cost does not grow with large observations.
 */

const HEAD = 300

/**
 * Results that carry no `is_error` flag (OpenAI tool messages, terminal
 * output) but read as a failure from their first characters: `Error...`,
 * `Exception...`, `Fatal...`, a Python traceback, a JSON `{"error": ...}`.
 */
const ERROR_START = /^\s*(?:error\b|exception\b|fatal\b|traceback \(most recent call last\)|\{\s*"error"\s*:)/i

export const looksLikeError = (text: string): boolean => ERROR_START.test(text.slice(0, 200))

/**
 * The providers' and runtimes' context-overflow wordings (OpenAI
 * `context_length_exceeded` / "maximum context length", Anthropic "prompt is
 * too long", Bedrock "input is too long", Gemini "input token count ...
 * exceeds the maximum", generic "exceeds the context window").
 */
const OVERFLOW =
  /context[ _-]?length[ _-]?exceeded|maximum context length|context[ _-]?window[ _-]?exceeded|prompt is too long|input is too long|exceeds? (?:the )?(?:model'?s? )?(?:maximum )?context (?:window|length|limit)|input token count.{0,40}exceeds the maximum|reduce the length of the messages/i

export const mentionsOverflow = (text: string): boolean => OVERFLOW.test(text.length > HEAD ? text.slice(0, HEAD) : text)
