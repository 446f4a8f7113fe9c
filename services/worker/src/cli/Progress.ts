/**
 * A progress bar on stderr for long replays, drawn only when stderr is a
 * terminal (never in pipes, files or CI logs), redrawn at most every 100 ms.
 */
export interface Progress {
  readonly tick: () => void
  readonly done: () => void
}

const WIDTH = 30

/** A bar over `total` steps (drawn on `stream` when it is a TTY). */
export const make = (total: number, stream: NodeJS.WriteStream = process.stderr): Progress => {
  if (stream.isTTY !== true || total === 0) return { tick: () => {}, done: () => {} }
  let n = 0
  let drawn = 0
  const draw = () => {
    const filled = Math.round((WIDTH * n) / total)
    stream.write(`\rreplaying [${"#".repeat(filled)}${".".repeat(WIDTH - filled)}] ${n}/${total} turns`)
  }
  return {
    tick: () => {
      n++
      const now = Date.now()
      if (now - drawn >= 100 || n === total) {
        drawn = now
        draw()
      }
    },
    done: () => stream.write("\r\x1b[2K"),
  }
}
