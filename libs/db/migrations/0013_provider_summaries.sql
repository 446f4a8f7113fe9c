-- provider-written summaries
--
-- A summary the provider wrote (Anthropic on-demand compaction) keeps the
-- signed block it returned, verbatim, to be sent in place of the span it
-- covers; `text` holds its readable content (the audit copy). NULL: a
-- summary ctxd wrote. Workers that predate the column read `text` only and
-- send it as ctxd's summary pair.
ALTER TABLE ctxd_summaries ADD COLUMN IF NOT EXISTS block jsonb;
