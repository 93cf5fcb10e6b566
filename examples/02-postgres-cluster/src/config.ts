/** Shared settings of the demo. */
export const DATABASE_URL =
  process.env.DATABASE_URL ?? process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/** The demo works in its own schema, recreated on every run. */
export const SCHEMA = process.env.JOBS_SCHEMA ?? 'cluster_demo';
/** Short leases so the takeover is quick to watch; production would use 30 s or more. */
export const LEASE_MS = 2_000;
