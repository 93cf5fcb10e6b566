/**
 * A large backlog on a table PostgreSQL has analysed (autovacuum analyses a table soon after a
 * bulk load): an acquisition must still cost the same at any backlog. Two things made it grow:
 * - the planner reads the acquisition's unknown batch size as a tenth of the waiting rows, and
 *   with statistics it then joined the batch to the table it updates by hashing every row of
 *   it (a sequential scan per acquisition);
 * - the same estimate put the statement's cost past `jit_above_cost`, so every acquisition was
 *   compiled first (~450 ms for a batch that runs in ~10 ms at 200,000 rows).
 * And the statements that find a batch of refs (renew, complete) compared every running row
 * with every ref when the statistics held no running rows, or not the renewing owner.
 * 20,000 rows: small enough that a sequential scan looks cheap to the planner, which is where
 * each of these plans went wrong. The plans are read with `EXPLAIN` (no time is measured): with the batch size known to the
 * planner and as the generic plan a prepared statement gets after five runs.
 */
import { type AcquireRequest, refOf } from '@jobs/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresJobStore } from '../src/index.js';
import {
  dropSchema,
  newJob,
  openStore,
  PG_URL,
  randomSchema,
  reachable,
  recordStatements,
  type SentStatement,
  sql,
} from './helpers.js';

const ROWS = 20_000;
const BATCH = 450;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/** Every node of a JSON plan, depth first. */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** A parameter as a literal for `EXECUTE name(…)`. */
function literal(client: pg.Client, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    const items = value.map((v) => `"${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
    return client.escapeLiteral(`{${items.join(',')}}`);
  }
  return client.escapeLiteral(String(value));
}

/**
 * The plans of a statement the store sent: with its parameters, and the generic plan a
 * prepared statement gets after five runs.
 */
async function plans(statement: {
  text: string;
  values: unknown[];
}): Promise<[PlanNode, PlanNode]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const custom = await client.query(`EXPLAIN (FORMAT JSON) ${statement.text}`, statement.values);
    await client.query(`PREPARE plan_of AS ${statement.text}`);
    await client.query("SET plan_cache_mode = 'force_generic_plan'");
    const args = statement.values.map((v) => literal(client, v)).join(', ');
    const generic = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE plan_of(${args})`);
    const planOf = (result: pg.QueryResult): PlanNode =>
      (result.rows[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })['QUERY PLAN'][0]?.Plan as PlanNode;
    return [planOf(custom), planOf(generic)];
  } finally {
    await client.end();
  }
}

describe.skipIf(!reachable)('@jobs/postgres on a large analysed table', () => {
  const schema = randomSchema('analysed');
  let store: PostgresJobStore;
  /** The statements the store sent, as pg got them. */
  let recorded: ReturnType<typeof recordStatements>;
  const sent = (): SentStatement[] => recorded.sent;
  let pool: pg.Pool;

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
    // Every client's statements (the store's pool, and its heartbeat pool for renewals).
    recorded = recordStatements();
    await openStore(schema).migrate();
    store = new PostgresJobStore({ pool, schema });
    await sql(
      `INSERT INTO "${schema}".jobs (type, payload, priority, due_at, retries_left, attempts, state, created_at)
       SELECT 'noop', jsonb_build_object('i', g), 0, now() - interval '1 minute', 3, 0, 'async', now()
       FROM generate_series(1, ${ROWS}) g`,
    );
    await sql(`ANALYZE "${schema}".jobs`);
  });

  afterAll(async () => {
    recorded?.restore();
    await store?.close();
    await pool?.end();
    await dropSchema(schema);
  });

  it('an acquisition finds its batch by primary key, with the batch size known and in the generic plan', async () => {
    const request: AcquireRequest = {
      owner: 'plans',
      limit: BATCH,
      leaseMs: 30_000,
      types: ['noop'],
      queues: null,
      tenants: null,
    };
    const jobs = await store.acquire(request);
    expect(jobs).toHaveLength(BATCH);
    const lease = sent().find((s) => /UPDATE [^;]*jobs" j\s+SET state = 'running'/.test(s.text));
    if (!lease) throw new Error('no lease statement was sent');

    const [custom, generic] = await plans(lease);
    for (const [which, plan] of [
      ['with the batch size', custom],
      ['generic', generic],
    ] as const) {
      const all = nodes(plan);
      const seqScans = all.filter(
        (n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'jobs',
      );
      expect(seqScans, `${which}: no sequential scan of the jobs table`).toEqual([]);
      const updated = all.find((n) => n['Node Type'] === 'ModifyTable');
      expect(updated, `${which}: the lease updates`).toBeDefined();
      expect(
        nodes(updated as PlanNode).some((n) => n['Index Name'] === 'jobs_pkey'),
        `${which}: the lease reads its rows by primary key`,
      ).toBe(true);
    }

    // Renewing the whole batch: the planner read `lock_owner = $1` of the prepared statement
    // as about one row and compared every running row with every ref (a nested loop re-reading
    // the refs for each row: 500 × 500). No nested loop may read the refs as its inner side.
    const sentBefore = sent().length;
    const renewed = await store.renewLeases('plans', 30_000, jobs.map(refOf));
    expect(renewed.lost).toEqual([]);
    const renewal = sent()
      .slice(sentBefore)
      .find((s) => /SET lock_expires_at/.test(s.text));
    if (!renewal) throw new Error('no renewal statement was sent');
    for (const [which, plan] of (await plans(renewal)).map(
      (p, i) => [i ? 'generic' : 'with the refs', p] as const,
    )) {
      const loops = nodes(plan).filter((n) => n['Node Type'] === 'Nested Loop');
      for (const loop of loops) {
        expect(loop.Plans?.[1]?.['Node Type'], `${which}: a nested loop's inner side`).not.toBe(
          'Function Scan',
        );
      }
    }
    // Completing it: the same holds for the completion (a DELETE joined to the refs).
    const sentBeforeComplete = sent().length;
    await store.complete(jobs.map(refOf));
    const completion = sent()
      .slice(sentBeforeComplete)
      .find((s) => /DELETE FROM [^;]*jobs" j/.test(s.text));
    if (!completion) throw new Error('no completion statement was sent');
    for (const [which, plan] of (await plans(completion)).map(
      (p, i) => [i ? 'generic' : 'with the refs', p] as const,
    )) {
      for (const loop of nodes(plan).filter((n) => n['Node Type'] === 'Nested Loop')) {
        expect(
          loop.Plans?.[1]?.['Node Type'],
          `completion, ${which}: a nested loop's inner side`,
        ).not.toBe('Function Scan');
      }
    }
  });

  it("the store's own connections compile nothing (jit off); your pool's sessions are left as they are", async () => {
    const own = openStore(schema);
    try {
      const shown = async (s: PostgresJobStore): Promise<string | undefined> => {
        const [queued] = await s.enqueue([newJob('probe')]);
        const [job] = await s.acquire({
          owner: 'jit',
          limit: 1,
          leaseMs: 30_000,
          types: ['probe'],
          queues: null,
          tenants: null,
        });
        if (!job || job.id !== queued?.job.id) throw new Error('probe job not acquired');
        return s.completeInTransaction(refOf(job), async (tx) => {
          const client = tx as pg.ClientBase;
          return (await client.query('SHOW jit')).rows[0]?.jit as string | undefined;
        });
      };
      expect(await shown(own)).toBe('off');
      const server = (await sql<{ jit: string }>('SHOW jit'))[0]?.jit;
      expect(await shown(store)).toBe(server);
    } finally {
      await own.close();
    }
  });
});
