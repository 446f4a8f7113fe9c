-- memory documents and their edit history per tenant, agent and user
--
-- owner '' = the agent's shared documents. tsv: tags (weight A) and text
-- in the english configuration, through an IMMUTABLE wrapper because
-- array_to_string is only STABLE. The GIN index serves `tsv @@ query`;
-- (tenant, agent, seq DESC) serves paging and the "any document" probe.
-- ctxd_memory_versions holds every kept version, the current one
-- included, and goes with its document.
--
-- ctxd_memory_words: the distinct words (lower case, 3 to 40 letters or
-- digits) of an agent's documents, for fuzzy matching: a query word with
-- a typo is matched to the nearest stored words by trigram similarity,
-- which then go through the text search. Short words against short
-- words: fast and accurate, where a trigram scan of whole texts is
-- neither. Words are never removed (a stale word matches nothing).
--
-- pg_trgm (PostgreSQL contrib) is installed in schema public when it can
-- be (under a database-wide advisory lock, so test schemas migrating at
-- once do not race on the catalog) and the words' trigram index created
-- with the operator class of whichever schema holds it; when it cannot
-- be installed the migration still succeeds and search runs without
-- fuzzy matching (MemoryStore looks the extension up when it starts).

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
