-- one commit function: turn, session length and user in one body
--
-- ctxd_commit_turn_v11 does what ctxd_commit_turn_v9 does (the commit of
-- ctxd_commit_turn, then on success the session's length and its user),
-- in one PL/pgSQL body instead of three nested calls, with the session's
-- id it already holds instead of looking the session up again for the
-- length and the user. The length row is raised by a plain UPDATE (it
-- exists from the session's second commit on) rather than INSERT ... ON
-- CONFLICT, which locked the row before updating it: less Postgres CPU
-- per commit.
--
-- Additive: workers of earlier releases keep calling ctxd_commit_turn,
-- _v7 and _v9, which stay as they are. $11 agent and $12 turns (both set
-- or the length is not recorded) and $13 user may be null. The length
-- keeps ctxd_record_session_length's rule: a count is only raised, and
-- the agent is the latest recorded.

      CREATE FUNCTION ctxd_commit_turn_v11(
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
        p_user text,
        OUT status text,
        OUT actual_last_seq integer,
        OUT stored_request_hash text,
        OUT stored_first_seq integer,
        OUT stored_last_seq integer,
        OUT stored_reply jsonb,
        OUT stored_reply_z bytea
      ) LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_id bigint;
        v_new boolean := false;
        v_last integer := p_expected_last_seq + jsonb_array_length(p_messages);
      BEGIN
        LOOP
          SELECT s.id, s.last_seq INTO v_id, actual_last_seq
          FROM ctxd_sessions s
          WHERE s.tenant = p_tenant AND s.session = p_session
          FOR NO KEY UPDATE;
          IF p_fence_shard IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM ctxd_shard_leases l
            WHERE l.shard = p_fence_shard AND l.owner = p_fence_owner AND l.epoch = p_fence_epoch
              AND l.expires_at > clock_timestamp()
          ) THEN
            status := 'not_owner';
            RETURN;
          END IF;
          EXIT WHEN v_id IS NOT NULL;
          IF p_expected_last_seq <> 0 THEN
            status := 'conflict';
            actual_last_seq := 0;
            RETURN;
          END IF;
          INSERT INTO ctxd_sessions (tenant, session) VALUES (p_tenant, p_session)
          ON CONFLICT (tenant, session) DO NOTHING
          RETURNING id, last_seq INTO v_id, actual_last_seq;
          v_new := v_id IS NOT NULL;
          EXIT WHEN v_new;
        END LOOP;

        IF NOT v_new THEN
          SELECT t.request_hash, t.first_seq, t.last_seq, t.reply, t.reply_z
          INTO stored_request_hash, stored_first_seq, stored_last_seq, stored_reply, stored_reply_z
          FROM ctxd_turns t
          WHERE t.session_id = v_id AND t.turn_id = p_turn_id;
          IF FOUND THEN
            status := 'exists';
            RETURN;
          END IF;
          IF actual_last_seq <> p_expected_last_seq THEN
            status := 'conflict';
            RETURN;
          END IF;
        END IF;

        INSERT INTO ctxd_messages (session_id, seq, role, content, tokens, encoding, turn_id)
        SELECT v_id, p_expected_last_seq + e.n::integer, e.v -> 'message' ->> 'role', e.v -> 'message',
               (e.v ->> 'tokens')::integer, e.v ->> 'encoding', p_turn_id
        FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e (v, n);
        INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply_z)
        VALUES (v_id, p_turn_id, p_request_hash, p_expected_last_seq + 1, v_last, p_reply_z);
        UPDATE ctxd_sessions SET last_seq = v_last, updated_at = now() WHERE id = v_id;
        status := 'ok';
        actual_last_seq := v_last;

        IF p_agent IS NOT NULL AND p_turns IS NOT NULL THEN
          UPDATE ctxd_session_lengths l SET agent = p_agent, turns = GREATEST(l.turns, p_turns)
          WHERE l.session_id = v_id AND (l.agent <> p_agent OR l.turns < p_turns);
          IF NOT FOUND THEN
            -- no row yet (or nothing to change): ctxd_record_session_length's upsert
            INSERT INTO ctxd_session_lengths AS l (session_id, tenant, agent, turns)
            VALUES (v_id, p_tenant, p_agent, GREATEST(p_turns, 0))
            ON CONFLICT (session_id) DO UPDATE
              SET agent = EXCLUDED.agent, turns = GREATEST(l.turns, EXCLUDED.turns)
              WHERE l.agent <> EXCLUDED.agent OR l.turns < EXCLUDED.turns;
          END IF;
        END IF;
        IF p_user IS NOT NULL THEN
          INSERT INTO ctxd_session_users (session_id, tenant, user_id) VALUES (v_id, p_tenant, p_user)
          ON CONFLICT DO NOTHING;
        END IF;
      END
      $fn$;
