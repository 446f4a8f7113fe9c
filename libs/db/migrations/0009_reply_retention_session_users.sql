-- reply retention, users of a session
--
-- Additive: workers of earlier releases keep calling ctxd_commit_turn(_v7)
-- and never read the new table.
--
-- ctxd_turns_reply_kept indexes the turns whose reply is still stored
-- (written by this release or v3+: reply_z; before v3: a jsonb reply with
-- "ok": true), so the pruner finds expired replies without a scan; a
-- pruned turn keeps its row (turn id, request hash, seq range) with the
-- small error reply "Conflict: the idempotency window passed" as its
-- jsonb reply and no reply_z, and leaves the index. Building it takes a
-- SHARE lock on ctxd_turns (commits wait) for as long as one index build
-- over the table takes.
--
-- ctxd_session_users: every user (options.user) a session's turns
-- carried, for deleting a user's sessions. ctxd_commit_turn_v9 is
-- ctxd_commit_turn_v7 followed, on success and when p_user is set, by
-- that insert in the same transaction.

      CREATE INDEX ctxd_turns_reply_kept ON ctxd_turns (created_at)
        WHERE reply_z IS NOT NULL OR reply ->> 'ok' = 'true';

      CREATE TABLE ctxd_session_users (
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        tenant text NOT NULL,
        user_id text NOT NULL,
        PRIMARY KEY (session_id, user_id)
      );
      CREATE INDEX ctxd_session_users_user ON ctxd_session_users (tenant, user_id);

      CREATE FUNCTION ctxd_commit_turn_v9(
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
      BEGIN
        SELECT c.status, c.actual_last_seq, c.stored_request_hash, c.stored_first_seq, c.stored_last_seq,
               c.stored_reply, c.stored_reply_z
        INTO status, actual_last_seq, stored_request_hash, stored_first_seq, stored_last_seq,
             stored_reply, stored_reply_z
        FROM ctxd_commit_turn_v7(p_tenant, p_session, p_turn_id, p_request_hash, p_expected_last_seq, p_messages,
                                 p_reply_z, p_fence_shard, p_fence_owner, p_fence_epoch, p_agent, p_turns) c;
        IF status = 'ok' AND p_user IS NOT NULL THEN
          INSERT INTO ctxd_session_users (session_id, tenant, user_id)
          SELECT s.id, s.tenant, p_user FROM ctxd_sessions s WHERE s.tenant = p_tenant AND s.session = p_session
          ON CONFLICT DO NOTHING;
        END IF;
      END
      $fn$;
