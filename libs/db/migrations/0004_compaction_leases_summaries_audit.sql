-- compaction leases, summaries, compactions audit
--
-- A lease row is never deleted: a release only expires it, so the fencing
-- token keeps growing for the session's lifetime. Lease times are the
-- database clock's. ctxd_compactions.finished_at is the compactor's clock
-- (the cooldown after repeated failures is measured against it).

      CREATE TABLE ctxd_compaction_leases (
        session_id bigint PRIMARY KEY REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        owner text NOT NULL,
        token bigint NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE TABLE ctxd_summaries (
        id bigserial PRIMARY KEY,
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        covers_from_seq integer NOT NULL,
        covers_to_seq integer NOT NULL,
        text text NOT NULL,
        mode text NOT NULL,
        depth integer NOT NULL,
        snapshot jsonb,
        token bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CHECK (covers_from_seq <= covers_to_seq)
      );
      CREATE INDEX ctxd_summaries_live ON ctxd_summaries (session_id, covers_to_seq DESC, id DESC);
      CREATE TABLE ctxd_compactions (
        id bigserial PRIMARY KEY,
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        outcome text NOT NULL,
        trigger text NOT NULL,
        covers_from_seq integer,
        covers_to_seq integer,
        summary_id bigint REFERENCES ctxd_summaries (id) ON DELETE SET NULL,
        summary text,
        mode text,
        depth integer,
        tokens_in integer NOT NULL DEFAULT 0,
        tokens_out integer NOT NULL DEFAULT 0,
        model text,
        duration_ms integer NOT NULL,
        owner text,
        token bigint,
        detail text,
        finished_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX ctxd_compactions_session ON ctxd_compactions (session_id, id DESC);
