/**
 * The registry of provider adapters: the one place a format name picks the
 * code that knows that format. Everything outside `providers/` asks it
 * (`Providers.of(format)`, or `Providers.ofProvider(provider)` for what
 * belongs to the model provider rather than to one format) instead of
 * switching on the name.
 */
import type { Turn } from "@ctxd/contracts"
import type * as CostModel from "../CostModel.ts"
import type * as Adapter from "./Adapter.ts"
import * as AnthropicAdapter from "./anthropic/index.ts"
import * as GeminiAdapter from "./gemini/index.ts"
import type * as ModelProvider from "./ModelProvider.ts"
import * as OpenAIChatAdapter from "./openai-chat/index.ts"
import * as OpenAIResponsesAdapter from "./openai-responses/index.ts"

const table: { readonly [F in Turn.Format]: Adapter.Adapter<F> } = {
  anthropic: AnthropicAdapter.adapter,
  openai: OpenAIChatAdapter.adapter,
  "openai-responses": OpenAIResponsesAdapter.adapter,
  gemini: GeminiAdapter.adapter,
}

/** Every adapter, in the contract's format order. */
export const all: ReadonlyArray<Adapter.Adapter> = Object.values(table) as ReadonlyArray<Adapter.Adapter>

/**
 * The adapter of `format`. For a format known only as a union (a decoded
 * request's `format`), its methods accept that union's inputs: the registry
 * keys each adapter by its own format, so the pairing holds.
 */
export const of = <F extends Turn.Format>(format: F): Adapter.Adapter<F> => table[format] as unknown as Adapter.Adapter<F>

/**
 * The adapter of a model provider's own format (Chat Completions for
 * `openai`): the format a request takes when none is given.
 */
export const forProvider = (provider: Turn.Provider): Adapter.Adapter => all.find((a) => a.provider === provider) ?? all[0]!

/** The adapter whose provider price rows name `provider` (`undefined`: none, e.g. `unknown`). */
export const forPrices = (provider: CostModel.Provider): Adapter.Adapter | undefined => all.find((a) => a.prices === provider)

/** True when `value` names a format with an adapter. */
export const isFormat = (value: unknown): value is Turn.Format => typeof value === "string" && Object.hasOwn(table, value)

const descriptors: { readonly [P in Turn.Provider]: ModelProvider.ModelProvider<P> } = {
  anthropic: AnthropicAdapter.Provider.descriptor,
  openai: OpenAIChatAdapter.Provider.descriptor,
  google: GeminiAdapter.Provider.descriptor,
}

/** Every model provider's descriptor, in the contract's provider order. */
export const providers: ReadonlyArray<ModelProvider.ModelProvider> = Object.values(
  descriptors,
) as ReadonlyArray<ModelProvider.ModelProvider>

/** The descriptor of model provider `provider`: its tokenizer, exact count, local body count and API errors. */
export const ofProvider = <P extends Turn.Provider>(provider: P): ModelProvider.ModelProvider<P> =>
  descriptors[provider] as unknown as ModelProvider.ModelProvider<P>

/** True when `value` names a model provider with a descriptor. */
export const isProvider = (value: unknown): value is Turn.Provider => typeof value === "string" && Object.hasOwn(descriptors, value)

/** The provider whose model names `name` matches (a configured model name alone), `undefined` when none claims it. */
export const byModelName = (name: string): Turn.Provider | undefined => providers.find((p) => p.modelNames?.test(name) === true)?.provider

/** The provider whose exact count backend is `backend` (`anthropic_api`, ...), `undefined` for none. */
export const byExactBackend = (backend: string): Turn.Provider | undefined =>
  providers.find((p) => p.exactCount?.backend === backend)?.provider

/** The provider whose API serves request `path` (the fake provider's and a gateway's routing), `undefined` for none. */
export const byApiPath = (path: string): Turn.Provider | undefined => providers.find((p) => p.api.serves(path))?.provider
