-- workers, shard leases, cluster settings
--
-- Times are the database clock's (now()); a worker's own clock never
-- decides a lease. Lease rows are seeded per shard by @ctxd/sharding once
-- the cluster's shard count is known (it is stored in ctxd_cluster).

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
