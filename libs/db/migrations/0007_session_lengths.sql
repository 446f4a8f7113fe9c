-- session lengths per tenant and agent
--
-- One row per session: its agent (the latest a turn named) and its turns
-- (assistant messages stored) as of its last commit. session_id is
-- ctxd_sessions.id, a bigserial: the index gives a tenant's agent's most
-- recently created sessions first, so the histogram read is bounded.
--
-- ctxd_record_session_length only raises a count (a retried or reordered
-- write never lowers it) and writes nothing when nothing changed; an
-- unknown session is a no-op. ctxd_commit_turn_v7 is ctxd_commit_turn
-- (unchanged; workers of earlier releases keep calling it) followed, on
-- success, by that upsert in the same transaction: still one round trip.
-- Like ctxd_commit_turn they resolve their tables through the caller's
-- search_path; never change their result columns in place.

      CREATE TABLE ctxd_session_lengths (
        session_id bigint PRIMARY KEY REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        tenant text NOT NULL,
        agent text NOT NULL,
        turns integer NOT NULL
      );
      CREATE INDEX ctxd_session_lengths_recent ON ctxd_session_lengths (tenant, agent, session_id DESC);

      CREATE FUNCTION ctxd_record_session_length(p_tenant text, p_session text, p_agent text, p_turns integer)
      RETURNS void LANGUAGE sql VOLATILE AS $fn$
        INSERT INTO ctxd_session_lengths AS l (session_id, tenant, agent, turns)
        SELECT s.id, s.tenant, p_agent, GREATEST(p_turns, 0)
        FROM ctxd_sessions s
        WHERE s.tenant = p_tenant AND s.session = p_session
        ON CONFLICT (session_id) DO UPDATE
          SET agent = EXCLUDED.agent, turns = GREATEST(l.turns, EXCLUDED.turns)
          WHERE l.agent <> EXCLUDED.agent OR l.turns < EXCLUDED.turns
      $fn$;

      CREATE FUNCTION ctxd_commit_turn_v7(
        p_tenant text,
        p_session text,
        p_turn_id text,
        p_request_hash text,
        p_expected_last_seq integer,
        p_messages jsonb,
        p_reply_z bytea,
        p_fence_shard integer,
        p_fence_owner text,
        p_fence_epoch bigint,
        p_agent text,
        p_turns integer,
        OUT status text,
        OUT actual_last_seq integer,
        OUT stored_request_hash text,
        OUT stored_first_seq integer,
        OUT stored_last_seq integer,
        OUT stored_reply jsonb,
        OUT stored_reply_z bytea
      ) LANGUAGE plpgsql VOLATILE AS $fn$
      BEGIN
        SELECT c.status, c.actual_last_seq, c.stored_request_hash, c.stored_first_seq, c.stored_last_seq,
               c.stored_reply, c.stored_reply_z
        INTO status, actual_last_seq, stored_request_hash, stored_first_seq, stored_last_seq,
             stored_reply, stored_reply_z
        FROM ctxd_commit_turn(p_tenant, p_session, p_turn_id, p_request_hash, p_expected_last_seq, p_messages,
                              p_reply_z, p_fence_shard, p_fence_owner, p_fence_epoch) c;
        IF status = 'ok' AND p_agent IS NOT NULL AND p_turns IS NOT NULL THEN
          PERFORM ctxd_record_session_length(p_tenant, p_session, p_agent, p_turns);
        END IF;
      END
      $fn$;
