/** The group commit's metrics (exported by the worker's registry). */
import { Metric, MetricBoundaries } from "effect"

/** `ctxd_commit_batch_turns`: turns per commit statement that went through (1: alone). */
export const commitTurns = Metric.histogram(
  "ctxd_commit_batch_turns",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 6 }),
  "turns each commit statement carried (group commit): 1 alone, more when commits waited together; rate(sum) / rate(count) is the mean batch",
)

/** `ctxd_commits_waiting`: turns waiting for their commit now, queued or in a statement in flight. */
export const commitsWaiting = Metric.gauge("ctxd_commits_waiting", {
  description:
    "turns waiting for their commit now (queued behind the commit statements in flight, or in one): high while Postgres is slow or locked",
})

/** `ctxd_commit_split_total`: batches rolled back as a whole and run again turn by turn. */
export const commitSplits = Metric.counter("ctxd_commit_split_total", {
  description: "group commits that failed as a whole (one turn Postgres refused, or the statement failed) and ran again turn by turn",
  incremental: true,
})
