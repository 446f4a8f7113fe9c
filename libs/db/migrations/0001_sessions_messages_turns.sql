-- sessions, messages, turns

      CREATE TABLE ctxd_sessions (
        id bigserial PRIMARY KEY,
        tenant text NOT NULL,
        session text NOT NULL,
        last_seq integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (tenant, session)
      );
      CREATE TABLE ctxd_messages (
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        seq integer NOT NULL,
        role text NOT NULL,
        content jsonb NOT NULL,
        tokens integer NOT NULL,
        encoding text NOT NULL,
        turn_id text,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, seq)
      );
      CREATE TABLE ctxd_turns (
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        turn_id text NOT NULL,
        request_hash text NOT NULL,
        first_seq integer NOT NULL,
        last_seq integer NOT NULL,
        reply jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, turn_id)
      );
