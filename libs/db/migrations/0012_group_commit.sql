-- group commit: many turns in one statement
--
-- ctxd_commit_turns_v12 commits each item as ctxd_commit_turn_v11 does,
-- in order, in the statement's one transaction (one round trip and one
-- WAL flush for them all), and returns one row per item with its place
-- (idx, from 0). An item whose outcome is not 'ok' writes nothing, as
-- alone; an error in any item rolls back the batch, which the worker
-- then runs again item by item. Additive: workers of earlier releases
-- keep calling ctxd_commit_turn_v11.

      CREATE FUNCTION ctxd_commit_turns_v12(
        p_tenants text[], p_sessions text[], p_turn_ids text[], p_hashes text[], p_expected integer[],
        p_messages jsonb, p_replies bytea, p_lengths integer[],
        p_shards integer[], p_owners text[], p_epochs bigint[], p_agents text[], p_turns integer[], p_users text[]
      ) RETURNS TABLE (idx integer, status text, actual_last_seq integer, stored_request_hash text, stored_first_seq integer,
                       stored_last_seq integer, stored_reply jsonb, stored_reply_z bytea)
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_off integer := 1;
        r record;
      BEGIN
        FOR i IN 1 .. array_length(p_tenants, 1) LOOP
          SELECT * INTO r FROM ctxd_commit_turn_v11(p_tenants[i], p_sessions[i], p_turn_ids[i], p_hashes[i], p_expected[i],
            p_messages -> (i - 1), substring(p_replies FROM v_off FOR p_lengths[i]),
            p_shards[i], p_owners[i], p_epochs[i], p_agents[i], p_turns[i], p_users[i]);
          v_off := v_off + p_lengths[i];
          idx := i - 1; status := r.status; actual_last_seq := r.actual_last_seq; stored_request_hash := r.stored_request_hash;
          stored_first_seq := r.stored_first_seq; stored_last_seq := r.stored_last_seq; stored_reply := r.stored_reply; stored_reply_z := r.stored_reply_z;
          RETURN NEXT;
        END LOOP;
      END
      $fn$;
