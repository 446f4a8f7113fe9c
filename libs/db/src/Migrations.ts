/**
 * Versioned schema migrations, kept in code and applied at start.
 *
 * All pending migrations run in one transaction that first takes
 * `pg_advisory_xact_lock(lockKey(schema))`, so workers starting together
 * queue on the lock and the later ones find nothing left to do; a migration
 * that fails rolls back every one applied with it. Applied versions are
 * recorded in `ctxd_schema_migrations`. Versions the code does not know
 * (written by a newer release during a rolling deploy) are left alone.
 *
 * Rules for new migrations: append with the next version, never edit one
 * that has shipped, and keep them additive (old workers keep running
 * against the new schema until they are replaced).
 */
import { Effect, Layer } from "effect"
import { hash } from "node:crypto"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"

/** One schema change. */
export interface Migration {
  readonly version: number
  readonly name: string
  /** One or more statements, run with the simple protocol (no parameters). */
  readonly sql: string
}

/** Every migration, in version order. */
export const migrations: ReadonlyArray<Migration> = [
  {
    version: 1,
    name: "sessions, messages, turns",
    sql: `
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
    `,
  },
  {
    version: 2,
    name: "workers, shard leases, cluster settings",
    // Times are the database clock's (now()); a worker's own clock never
    // decides a lease. Lease rows are seeded per shard by @ctxd/sharding once
    // the cluster's shard count is known (it is stored in ctxd_cluster).
    sql: `
      CREATE TABLE ctxd_workers (
        id text PRIMARY KEY,
        address text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE ctxd_shard_leases (
        shard integer PRIMARY KEY CHECK (shard >= 0),
        owner text,
        epoch bigint NOT NULL DEFAULT 0,
        expires_at timestamptz
      );
      CREATE TABLE ctxd_cluster (
        key text PRIMARY KEY,
        value text NOT NULL
      );
    `,
  },
  {
    version: 3,
    name: "compressed turn replies, one-statement commit function",
    // reply_z: a codec byte, then the reply's UTF-8 JSON compressed by the
    // worker (see internal/replyCodec.ts); stored EXTERNAL so Postgres does
    // not try to compress it again. Rows written before keep their jsonb
    // reply, and a worker of this release reads either column. The CHECK is
    // NOT VALID: every old row has a reply, and validating would scan the table.
    //
    // ctxd_commit_turn is SECURITY INVOKER and has no SET search_path on
    // purpose: it lives in the migrated schema and resolves its tables through
    // the caller's search_path at call time (each connection's is the
    // configured schema), like every other statement of the store. A SET
    // clause would cost a configuration save/restore on every call, and
    // `SET search_path FROM CURRENT` would pin whatever the migrating
    // connection had. Its result columns are part of prepared statements on
    // live connections: never change them in place, add a new function.
    //
    // A commit that fails returns a status instead of raising, so the
    // statement commits: it must write nothing before it knows it succeeds.
    // Hence no upsert: an existing session is locked with FOR NO KEY UPDATE
    // (no new row version), and a new one is created only once the fence and
    // the sequence have been checked.
    sql: `
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
    `,
  },
  {
    version: 4,
    name: "compaction leases, summaries, compactions audit",
    // A lease row is never deleted: a release only expires it, so the fencing
    // token keeps growing for the session's lifetime. Lease times are the
    // database clock's. ctxd_compactions.finished_at is the compactor's clock
    // (the cooldown after repeated failures is measured against it).
    sql: `
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
    `,
  },
  {
    version: 5,
    name: "knowledge documents per tenant and agent",
    sql: `
      CREATE TABLE ctxd_knowledge (
        tenant text NOT NULL,
        agent text NOT NULL,
        id text NOT NULL,
        title text NOT NULL,
        body text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, agent, id)
      );
    `,
  },
  {
    version: 6,
    name: "usage reports counted once per turn",
    sql: `
      CREATE TABLE ctxd_usage_reports (
        tenant text NOT NULL,
        session text NOT NULL,
        turn_id text NOT NULL,
        billed integer NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, session, turn_id)
      );
    `,
  },
  {
    version: 7,
    name: "session lengths per tenant and agent",
    // One row per session: its agent (the latest a turn named) and its turns
    // (assistant messages stored) as of its last commit. session_id is
    // ctxd_sessions.id, a bigserial: the index gives a tenant's agent's most
    // recently created sessions first, so the histogram read is bounded.
    //
    // ctxd_record_session_length only raises a count (a retried or reordered
    // write never lowers it) and writes nothing when nothing changed; an
    // unknown session is a no-op. ctxd_commit_turn_v7 is ctxd_commit_turn
    // (unchanged; workers of earlier releases keep calling it) followed, on
    // success, by that upsert in the same transaction: still one round trip.
    // Like ctxd_commit_turn they resolve their tables through the caller's
    // search_path; never change their result columns in place.
    sql: `
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
    `,
  },
  {
    version: 8,
    name: "memory documents and their edit history per tenant, agent and user",
    // owner '' = the agent's shared documents. tsv: tags (weight A) and text
    // in the english configuration, through an IMMUTABLE wrapper because
    // array_to_string is only STABLE. The GIN index serves `tsv @@ query`;
    // (tenant, agent, seq DESC) serves paging and the "any document" probe.
    // ctxd_memory_versions holds every kept version, the current one
    // included, and goes with its document.
    //
    // ctxd_memory_words: the distinct words (lower case, 3 to 40 letters or
    // digits) of an agent's documents, for fuzzy matching: a query word with
    // a typo is matched to the nearest stored words by trigram similarity,
    // which then go through the text search. Short words against short
    // words: fast and accurate, where a trigram scan of whole texts is
    // neither. Words are never removed (a stale word matches nothing).
    //
    // pg_trgm (PostgreSQL contrib) is installed in schema public when it can
    // be (under a database-wide advisory lock, so test schemas migrating at
    // once do not race on the catalog) and the words' trigram index created
    // with the operator class of whichever schema holds it; when it cannot
    // be installed the migration still succeeds and search runs without
    // fuzzy matching (MemoryStore looks the extension up when it starts).
    sql: `
      CREATE FUNCTION ctxd_memory_tsv(p_body text, p_tags text[]) RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        SELECT setweight(to_tsvector('english'::regconfig, array_to_string(p_tags, ' ')), 'A')
               || to_tsvector('english'::regconfig, p_body)
      $fn$;
      CREATE TABLE ctxd_memory (
        tenant text NOT NULL,
        agent text NOT NULL,
        id text NOT NULL,
        owner text NOT NULL DEFAULT '',
        seq bigint GENERATED ALWAYS AS IDENTITY,
        kind text NOT NULL CHECK (kind IN ('memory', 'learning')),
        body text NOT NULL,
        tags text[] NOT NULL DEFAULT '{}',
        source text,
        version integer NOT NULL DEFAULT 1,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        tsv tsvector GENERATED ALWAYS AS (ctxd_memory_tsv(body, tags)) STORED,
        PRIMARY KEY (tenant, agent, id)
      );
      CREATE INDEX ctxd_memory_recent ON ctxd_memory (tenant, agent, seq DESC);
      CREATE INDEX ctxd_memory_tsv_gin ON ctxd_memory USING gin (tsv);
      CREATE TABLE ctxd_memory_versions (
        tenant text NOT NULL,
        agent text NOT NULL,
        id text NOT NULL,
        version integer NOT NULL,
        body text NOT NULL,
        tags text[] NOT NULL,
        source text,
        at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, agent, id, version),
        FOREIGN KEY (tenant, agent, id) REFERENCES ctxd_memory (tenant, agent, id) ON DELETE CASCADE
      );
      CREATE TABLE ctxd_memory_words (
        tenant text NOT NULL,
        agent text NOT NULL,
        word text NOT NULL,
        PRIMARY KEY (tenant, agent, word)
      );
      DO $do$
      DECLARE nsp text;
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('ctxd/extension/pg_trgm'));
        BEGIN
          CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'ctxd: pg_trgm is not available (%); memory search runs without fuzzy matching', SQLERRM;
        END;
        SELECT n.nspname INTO nsp FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
        IF nsp IS NOT NULL THEN
          EXECUTE format('CREATE INDEX ctxd_memory_words_trgm ON ctxd_memory_words USING gin (word %I.gin_trgm_ops)', nsp);
        END IF;
      END
      $do$;
    `,
  },
  {
    version: 9,
    name: "reply retention, users of a session",
    // Additive: workers of earlier releases keep calling ctxd_commit_turn(_v7)
    // and never read the new table.
    //
    // ctxd_turns_reply_kept indexes the turns whose reply is still stored
    // (written by this release or v3+: reply_z; before v3: a jsonb reply with
    // "ok": true), so the pruner finds expired replies without a scan; a
    // pruned turn keeps its row (turn id, request hash, seq range) with the
    // small error reply "Conflict: the idempotency window passed" as its
    // jsonb reply and no reply_z, and leaves the index. Building it takes a
    // SHARE lock on ctxd_turns (commits wait) for as long as one index build
    // over the table takes.
    //
    // ctxd_session_users: every user (options.user) a session's turns
    // carried, for deleting a user's sessions. ctxd_commit_turn_v9 is
    // ctxd_commit_turn_v7 followed, on success and when p_user is set, by
    // that insert in the same transaction.
    sql: `
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
    `,
  },
  {
    version: 10,
    name: "partitioned messages and turns",
    // Scale-out layout (README "Scaling the store"): ctxd_messages becomes a
    // table partitioned by RANGE (session_id) whose first partition is the
    // old table (ctxd_messages_v1, sessions below the cut) and whose second,
    // ctxd_messages_h, is HASH-partitioned by session_id in 16; ctxd_turns
    // becomes partitioned by RANGE (created_at): the old table covers
    // everything before the cut, then one partition per UTC day (created
    // ahead by ctxd_turn_partitions_ensure, dropped whole once expired) and a
    // DEFAULT partition so no insert ever lacks a partition. The names stay
    // (every statement of every release keeps working) and the columns are
    // copied from the old tables with LIKE, so columns other migrations added
    // come along. The turns' uniqueness is (session_id, turn_id, created_at)
    // (a partitioned table's unique keys include its partition key); a turn
    // id is unique per session because ctxd_commit_turn checks it under the
    // session's row lock, as it always has.
    //
    // ATTACH of the old tables scans them unless a validated CHECK proves
    // the bound, and that scan holds an ACCESS EXCLUSIVE lock. So this
    // migration converts only while both tables are empty (new installs);
    // a populated deployment keeps the plain tables (every query works on
    // both layouts) until an operator runs the online conversion
    // (`Partitions.convert`, libs/db/scripts/partitions.ts), which validates
    // those CHECKs first without blocking writes, then calls
    // ctxd_partition_store for a swap that takes milliseconds.
    sql: `
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
        SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']*)''\\)'))[1]::timestamptz
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
    `,
  },
  {
    version: 11,
    name: "one commit function: turn, session length and user in one body",
    // ctxd_commit_turn_v11 does what ctxd_commit_turn_v9 does (the commit of
    // ctxd_commit_turn, then on success the session's length and its user),
    // in one PL/pgSQL body instead of three nested calls, with the session's
    // id it already holds instead of looking the session up again for the
    // length and the user. The length row is raised by a plain UPDATE (it
    // exists from the session's second commit on) rather than INSERT ... ON
    // CONFLICT, which locked the row before updating it. Measured with
    // pgbench (2 clients, a 4.6 KB reply): ~0.92 → ~0.68 ms of Postgres CPU
    // per commit.
    //
    // Additive: workers of earlier releases keep calling ctxd_commit_turn,
    // _v7 and _v9, which stay as they are. $11 agent and $12 turns (both set
    // or the length is not recorded) and $13 user may be null. The length
    // keeps ctxd_record_session_length's rule: a count is only raised, and
    // the agent is the latest recorded.
    sql: `
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
    `,
  },
  {
    version: 12,
    name: "group commit: many turns in one statement",
    // ctxd_commit_turns_v12 commits each item as ctxd_commit_turn_v11 does,
    // in order, in the statement's one transaction (one round trip and one
    // WAL flush for them all), and returns one row per item with its place
    // (idx, from 0). An item whose outcome is not 'ok' writes nothing, as
    // alone; an error in any item rolls back the batch, which the worker
    // then runs again item by item. Additive: workers of earlier releases
    // keep calling ctxd_commit_turn_v11.
    sql: `
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
    `,
  },
]

/** The advisory lock key for migrating `schema`: the first 8 bytes of SHA-1(`ctxd/migrations/<schema>`), signed. */
export const lockKey = (schema: string): bigint =>
  hash("sha1", `ctxd/migrations/${schema}`, "buffer").readBigInt64BE(0)

const TABLE = `
  CREATE TABLE IF NOT EXISTS ctxd_schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`

/**
 * Applies the migrations of `list` not yet recorded, in version order, in one
 * transaction under the schema's advisory lock. Returns the versions applied
 * by this call (empty when the schema was up to date).
 */
export const apply = (
  list: ReadonlyArray<Migration>,
): Effect.Effect<ReadonlyArray<number>, DatabaseUnavailable | DatabaseError, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    const applied = yield* db.transaction((tx) =>
      Effect.gen(function* () {
        // a migration may legitimately take longer than a turn's statement
        yield* tx.query("SET LOCAL statement_timeout = 0")
        yield* tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(db.schema).toString()])
        yield* tx.query(TABLE)
        const { rows } = yield* tx.query<{ version: number }>("SELECT version FROM ctxd_schema_migrations")
        const done = new Set(rows.map((row) => row.version))
        const pending = [...list].filter((m) => !done.has(m.version)).sort((a, b) => a.version - b.version)
        for (const migration of pending) {
          yield* tx.query(migration.sql)
          yield* tx.query("INSERT INTO ctxd_schema_migrations (version, name) VALUES ($1, $2)", [
            migration.version,
            migration.name,
          ])
        }
        const newest = Math.max(0, ...list.map((m) => m.version))
        const unknown = rows.filter((row) => row.version > newest).map((row) => row.version)
        if (unknown.length > 0) {
          yield* Effect.logWarning(`schema ${db.schema} has migrations newer than this release: ${unknown.join(", ")}`)
        }
        return pending.map((m) => m.version)
      }),
    )
    if (applied.length > 0) {
      yield* Effect.logInfo(`schema ${db.schema}: applied migrations ${applied.join(", ")}`)
    }
    return applied
  })

/** Applies {@link migrations}. */
export const run: Effect.Effect<ReadonlyArray<number>, DatabaseUnavailable | DatabaseError, Database> =
  apply(migrations)

/** Runs {@link run} when built; provide it before anything that uses the tables. */
export const layer: Layer.Layer<never, DatabaseUnavailable | DatabaseError, Database> = Layer.effectDiscard(run)
