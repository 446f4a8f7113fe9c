-- knowledge documents per tenant and agent

      CREATE TABLE ctxd_knowledge (
        tenant text NOT NULL,
        agent text NOT NULL,
        id text NOT NULL,
        title text NOT NULL,
        body text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, agent, id)
      );
