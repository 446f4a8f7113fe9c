-- usage reports counted once per turn

      CREATE TABLE ctxd_usage_reports (
        tenant text NOT NULL,
        session text NOT NULL,
        turn_id text NOT NULL,
        billed integer NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, session, turn_id)
      );
