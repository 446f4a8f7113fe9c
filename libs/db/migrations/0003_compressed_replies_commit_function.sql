-- compressed turn replies, one-statement commit function
--
-- reply_z: a codec byte, then the reply's UTF-8 JSON compressed by the
-- worker (see internal/replyCodec.ts); stored EXTERNAL so Postgres does
-- not try to compress it again. Rows written before keep their jsonb
-- reply, and a worker of this release reads either column. The CHECK is
-- NOT VALID: every old row has a reply, and validating would scan the table.
--
-- ctxd_commit_turn is SECURITY INVOKER and has no SET search_path on
-- purpose: it lives in the migrated schema and resolves its tables through
-- the caller's search_path at call time (each connection's is the
-- configured schema), like every other statement of the store. A SET
-- clause would cost a configuration save/restore on every call, and
-- `SET search_path FROM CURRENT` would pin whatever the migrating
-- connection had. Its result columns are part of prepared statements on
-- live connections: never change them in place, add a new function.
--
-- A commit that fails returns a status instead of raising, so the
-- statement commits: it must write nothing before it knows it succeeds.
-- Hence no upsert: an existing session is locked with FOR NO KEY UPDATE
-- (no new row version), and a new one is created only once the fence and
-- the sequence have been checked.

      ALTER TABLE ctxd_turns ALTER COLUMN reply DROP NOT NULL, ADD COLUMN reply_z bytea;
      ALTER TABLE ctxd_turns ALTER COLUMN reply_z SET STORAGE EXTERNAL;
      ALTER TABLE ctxd_turns
        ADD CONSTRAINT ctxd_turns_reply_present CHECK (reply IS NOT NULL OR reply_z IS NOT NULL) NOT VALID;

      CREATE FUNCTION ctxd_commit_turn(
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
          -- After the lock (which may have waited), against the clock now. No
          -- lock on the lease row: commits on one shard must not contend on it.
          IF p_fence_shard IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM ctxd_shard_leases l
            WHERE l.shard = p_fence_shard AND l.owner = p_fence_owner AND l.epoch = p_fence_epoch
              AND l.expires_at > clock_timestamp()
          ) THEN
            status := 'not_owner';
            RETURN;
          END IF;
          EXIT WHEN v_id IS NOT NULL;
          -- A new session: it has no turns, and any other expected seq fails
          -- without creating it (linearized before a concurrent creator).
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
          -- created by a concurrent commit since our SELECT: lock it like any other
        END LOOP;

        IF NOT v_new THEN
          -- Its own statement after the lock, so it sees a turn committed by a writer we waited for.
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
      END
      $fn$;
