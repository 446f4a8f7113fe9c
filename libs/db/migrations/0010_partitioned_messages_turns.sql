-- partitioned messages and turns
--
-- Scale-out layout (README "Scaling the store"): ctxd_messages becomes a
-- table partitioned by RANGE (session_id) whose first partition is the
-- old table (ctxd_messages_v1, sessions below the cut) and whose second,
-- ctxd_messages_h, is HASH-partitioned by session_id in 16; ctxd_turns
-- becomes partitioned by RANGE (created_at): the old table covers
-- everything before the cut, then one partition per UTC day (created
-- ahead by ctxd_turn_partitions_ensure, dropped whole once expired) and a
-- DEFAULT partition so no insert ever lacks a partition. The names stay
-- (every statement of every release keeps working) and the columns are
-- copied from the old tables with LIKE, so columns other migrations added
-- come along. The turns' uniqueness is (session_id, turn_id, created_at)
-- (a partitioned table's unique keys include its partition key); a turn
-- id is unique per session because ctxd_commit_turn checks it under the
-- session's row lock, as it always has.
--
-- ATTACH of the old tables scans them unless a validated CHECK proves
-- the bound, and that scan holds an ACCESS EXCLUSIVE lock. So this
-- migration converts only while both tables are empty (new installs);
-- a populated deployment keeps the plain tables (every query works on
-- both layouts) until an operator runs the online conversion
-- (`Partitions.convert`, libs/db/scripts/partitions.ts), which validates
-- those CHECKs first without blocking writes, then calls
-- ctxd_partition_store for a swap that takes milliseconds.

      CREATE FUNCTION ctxd_turn_partitions_ensure(p_days integer) RETURNS SETOF text
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_day timestamptz := date_trunc('day', now(), 'UTC');
        v_cut timestamptz;
        v_name text;
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'ctxd_turns'::regclass) THEN
          RETURN;
        END IF;
        -- the legacy partition's upper bound: new partitions start there
        SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']*)''\)'))[1]::timestamptz
        INTO v_cut
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'ctxd_turns'::regclass AND pg_get_expr(c.relpartbound, c.oid) LIKE '%MINVALUE%';
        FOR d IN 0 .. GREATEST(p_days, 0) LOOP
          CONTINUE WHEN v_cut IS NOT NULL AND v_day + make_interval(days => d) < v_cut;
          v_name := 'ctxd_turns_p' || to_char((v_day + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD');
          CONTINUE WHEN to_regclass(v_name) IS NOT NULL;
          BEGIN
            EXECUTE format('CREATE TABLE %I PARTITION OF ctxd_turns FOR VALUES FROM (%L) TO (%L)', v_name,
                           v_day + make_interval(days => d), v_day + make_interval(days => d + 1));
            EXECUTE format('ALTER TABLE %I ALTER COLUMN reply_z SET STORAGE EXTERNAL', v_name);
            RETURN NEXT v_name;
          EXCEPTION WHEN check_violation THEN
            -- the default partition already holds turns of that day: they stay there, later days go on
            RAISE WARNING 'ctxd: % not created, ctxd_turns_default holds turns of that day', v_name;
          END;
        END LOOP;
      END
      $fn$;

      CREATE FUNCTION ctxd_partition_store(p_cut_id bigint, p_cut_at timestamptz, p_hash integer) RETURNS boolean
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_seq text := pg_get_serial_sequence('ctxd_sessions', 'id');
      BEGIN
        -- ctxd_sessions too: attaching the old tables replaces their foreign keys' triggers on it.
        -- Sessions first, as every commit does. A reader holding a child table while waiting for
        -- ctxd_sessions would deadlock with us: callers set a lock_timeout below deadlock_timeout,
        -- so we are the one who gives up (and retry).
        LOCK TABLE ctxd_sessions, ctxd_messages, ctxd_turns IN ACCESS EXCLUSIVE MODE;
        IF EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'ctxd_messages'::regclass) THEN
          RETURN false;
        END IF;
        IF date_trunc('day', p_cut_at, 'UTC') <> p_cut_at THEN
          RAISE EXCEPTION 'the turns cut % is not a UTC day boundary', p_cut_at;
        END IF;
        -- sessions created from now on get ids from the cut: their messages go to the hash partitions
        IF COALESCE(pg_sequence_last_value(v_seq::regclass), 0) < p_cut_id - 1 THEN
          PERFORM setval(v_seq, p_cut_id, false);
        END IF;

        ALTER TABLE ctxd_messages RENAME TO ctxd_messages_v1;
        ALTER INDEX ctxd_messages_pkey RENAME TO ctxd_messages_v1_pkey;
        CREATE TABLE ctxd_messages (
          LIKE ctxd_messages_v1 INCLUDING DEFAULTS INCLUDING STORAGE,
          PRIMARY KEY (session_id, seq),
          FOREIGN KEY (session_id) REFERENCES ctxd_sessions (id) ON DELETE CASCADE
        ) PARTITION BY RANGE (session_id);
        EXECUTE format('ALTER TABLE ctxd_messages ATTACH PARTITION ctxd_messages_v1 FOR VALUES FROM (MINVALUE) TO (%s)', p_cut_id);
        EXECUTE format('CREATE TABLE ctxd_messages_h PARTITION OF ctxd_messages FOR VALUES FROM (%s) TO (MAXVALUE) PARTITION BY HASH (session_id)', p_cut_id);
        FOR r IN 0 .. p_hash - 1 LOOP
          EXECUTE format('CREATE TABLE %I PARTITION OF ctxd_messages_h FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                         'ctxd_messages_h' || lpad(r::text, 2, '0'), p_hash, r);
        END LOOP;

        ALTER TABLE ctxd_turns RENAME TO ctxd_turns_v1;
        ALTER INDEX ctxd_turns_pkey RENAME TO ctxd_turns_v1_pkey;
        IF to_regclass('ctxd_turns_v1_key') IS NULL THEN
          CREATE UNIQUE INDEX ctxd_turns_v1_key ON ctxd_turns_v1 (session_id, turn_id, created_at);
        END IF;
        ALTER TABLE ctxd_turns_v1 ADD CONSTRAINT ctxd_turns_v1_key UNIQUE USING INDEX ctxd_turns_v1_key;
        CREATE TABLE ctxd_turns (
          LIKE ctxd_turns_v1 INCLUDING DEFAULTS INCLUDING STORAGE,
          CONSTRAINT ctxd_turns_key UNIQUE (session_id, turn_id, created_at),
          FOREIGN KEY (session_id) REFERENCES ctxd_sessions (id) ON DELETE CASCADE
        ) PARTITION BY RANGE (created_at);
        EXECUTE format('ALTER TABLE ctxd_turns ATTACH PARTITION ctxd_turns_v1 FOR VALUES FROM (MINVALUE) TO (%L)', p_cut_at);
        CREATE TABLE ctxd_turns_default PARTITION OF ctxd_turns DEFAULT;
        ALTER TABLE ctxd_turns_default ALTER COLUMN reply_z SET STORAGE EXTERNAL;
        -- migration 9's index of the turns whose reply is kept (the pruner's): on the partitioned
        -- table, so every partition has it; the old table's own copy is attached, not rebuilt
        IF to_regclass('ctxd_turns_reply_kept') IS NOT NULL THEN
          ALTER INDEX ctxd_turns_reply_kept RENAME TO ctxd_turns_v1_reply_kept;
          CREATE INDEX ctxd_turns_reply_kept ON ctxd_turns (created_at) WHERE reply_z IS NOT NULL OR reply ->> 'ok' = 'true';
        END IF;
        RETURN true;
      END
      $fn$;

      LOCK TABLE ctxd_sessions, ctxd_messages, ctxd_turns IN ACCESS EXCLUSIVE MODE;
      DO $do$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM ctxd_messages) AND NOT EXISTS (SELECT 1 FROM ctxd_turns) THEN
          PERFORM ctxd_partition_store(1, date_trunc('day', now(), 'UTC'), 16);
          PERFORM ctxd_turn_partitions_ensure(3);
        END IF;
      END
      $do$;
