/**
 * Test-file hooks around the fake provider (vitest only: kept apart from
 * `Replay`, which the bench imports outside vitest).
 */
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach } from "@effect/vitest"
import { warmUp } from "./Replay.ts"

/**
 * A fake provider for the whole test file (started once with the tokenizers
 * warmed up, reset before each test, closed after): returns its getter.
 */
export const fakeProvider = (): (() => FakeProvider.FakeProviderServer) => {
  let server: FakeProvider.FakeProviderServer | undefined
  beforeAll(async () => {
    server = await FakeProvider.start()
    warmUp()
  })
  afterAll(() => server?.close())
  beforeEach(() => server!.reset())
  return () => server!
}
