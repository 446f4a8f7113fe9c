/**
 * The defaults of `ctxd replay` (a module of its own so the usage text shows
 * them without loading the replay): Claude Sonnet 5.5 (Sonnet 4.5, the
 * default before, reaches end of life on 2026-11-30), model calls 10 s apart
 * (no cache entry expires between agent steps), a 40-message sliding window
 * as the second baseline.
 */
export const defaults = { model: "claude-sonnet-5-5", gapSeconds: 10, slidingMessages: 40 } as const
