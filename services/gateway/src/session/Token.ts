/**
 * Turning a client's value (a session header, a cache key, a digest) into a
 * subject token of the wire contract: `[A-Za-z0-9_-]{1,128}`. A value that
 * is one already is kept as it is (a UUID session id stays readable in
 * `ctxd inspect`); any other is cleaned and suffixed with a hash of the
 * original, so two values that clean alike (`a.b`, `a_b`) stay two sessions.
 */
import { createHash } from "node:crypto"

/** The subject token pattern of the wire contract. */
export const TOKEN = /^[A-Za-z0-9_-]{1,128}$/

/** The longest client value read at all: longer ones are refused (a header is not a place for a prompt). */
export const MAX_VALUE = 1024

/** Hex SHA-256 of `text`, cut to `chars` characters. */
export const digest = (text: string, chars = 32): string => createHash("sha256").update(text, "utf8").digest("hex").slice(0, chars)

/**
 * `value` as a subject token: itself when it is one; else its characters
 * outside `[A-Za-z0-9_-]` written `_`, cut to 100 characters, then `-` and
 * 16 hex characters of its SHA-256. Undefined for an empty (or all-blank)
 * value or one over {@link MAX_VALUE} characters.
 */
export const toToken = (value: string): string | undefined => {
  const trimmed = value.trim()
  if (trimmed.length === 0 || trimmed.length > MAX_VALUE) return undefined
  if (TOKEN.test(trimmed)) return trimmed
  const cleaned = trimmed.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 100)
  return `${cleaned}-${digest(trimmed, 16)}`
}

/** `base` with `suffix` after a `-`, the base cut so that the whole stays a token (≤ 128 characters). */
export const withSuffix = (base: string, suffix: string): string => `${base.slice(0, 127 - suffix.length)}-${suffix}`
