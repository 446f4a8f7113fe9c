/** Builders for synthetic histories in the provider-neutral model. */
import type { Conversation } from "@ctxd/contracts"

let counter = 0

export const system = (text: string): Conversation.Message => ({ role: "system", parts: [{ type: "text", text }] })
export const user = (text: string): Conversation.Message => ({ role: "user", parts: [{ type: "text", text }] })
export const say = (text: string): Conversation.Message => ({ role: "assistant", parts: [{ type: "text", text }] })

export interface CallSpec {
  readonly name: string
  readonly input?: unknown
  /** OpenAI raw arguments string; used alone when `input` is undefined. */
  readonly raw?: string
  readonly id?: string
}

export const callMessage = (...calls: ReadonlyArray<CallSpec>): Conversation.Message => ({
  role: "assistant",
  parts: calls.map((c) => ({
    type: "tool_call",
    id: c.id ?? `c${++counter}`,
    name: c.name,
    input: c.input,
    ...(c.raw === undefined ? {} : { arguments: c.raw }),
  })),
})

export const resultMessage = (callId: string, text: string, isError = false): Conversation.Message => ({
  role: "tool",
  parts: [{ type: "tool_result", callId, content: [{ type: "text", text }], isError }],
})

/** An assistant call and its result: two messages. */
export const exchange = (
  name: string,
  input: unknown,
  result: string,
  options: { readonly isError?: boolean; readonly raw?: string } = {},
): ReadonlyArray<Conversation.Message> => {
  const id = `c${++counter}`
  return [
    callMessage({ name, input, id, ...(options.raw === undefined ? {} : { raw: options.raw }) }),
    resultMessage(id, result, options.isError ?? false),
  ]
}

/** `n` copies of the same exchange (fresh call ids each time). */
export const repeat = (n: number, make: () => ReadonlyArray<Conversation.Message>): ReadonlyArray<Conversation.Message> =>
  Array.from({ length: n }, make).flat()

/** A typical start: system prompt and the user's request. */
export const start = (): ReadonlyArray<Conversation.Message> => [system("You are helpful."), user("Please help.")]
