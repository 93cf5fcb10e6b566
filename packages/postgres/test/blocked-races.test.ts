/**
 * Blocked sets under a race the conformance suite cannot time: a rebalance decides to block a
 * job on reads that a settle changes before the block is written. The interleaving is forced
 * by pausing the rebalance's connection right before its block UPDATE, on a real server.
 */
import { type AcquireRequest, type Job, type JobStore, refOf } from '@jobs/core';
import {
  driveAsync,
  type Executor,
  type Operation,
  postgresDialect,
  type Query,
  type QueryOutcome,
  type RunOptions,
  SqlJobStore,
} from '@jobs/core/sql';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PgExecutor } from '../src/postgres-store.js';
import { dropSchema, newJob, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

/** Runs operations statement by statement, and runs `beforeBlock` once before a block UPDATE. */
class PausingExecutor implements Executor {
  beforeBlock: (() => Promise<void>) | null = null;

  constructor(private readonly inner: Executor) {}

  run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    if (!this.beforeBlock || options.transaction || options.tx) return this.inner.run(op, options);
    return driveAsync(op, async (query) => {
      const hook = this.beforeBlock;
      if (hook && /SET "state" = 'blocked'/.test(query.sql)) {
        this.beforeBlock = null;
        await hook();
      }
      return this.inner.run(oneStatement(query), { transaction: false });
    });
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** An operation of one statement: its outcome. */
function* oneStatement(query: Query): Operation<QueryOutcome> {
  return yield query;
}

const REQUEST: AcquireRequest = {
  owner: 'test',
  limit: 10,
  leaseMs: 30_000,
  types: ['work'],
  queues: null,
  tenants: null,
};

describe.skipIf(!reachable)('blocked sets: races with settles', () => {
  const schema = randomSchema('br');
  const closing: { close(): Promise<unknown> }[] = [];
  afterAll(async () => {
    await Promise.allSettled(closing.map((c) => c.close()));
    await dropSchema(schema);
  });

  it('a block decided before a settle freed the slot is undone: the job does not wait for the sweep', async () => {
    const other = openStore(schema);
    closing.push(other);
    await other.migrate();
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    const dialect = postgresDialect({ tablePrefix: '', schema });
    const executor = new PausingExecutor(
      new PgExecutor(pool, { connectionString: PG_URL }, true, dialect),
    );
    const store = new SqlJobStore({
      label: 'test',
      name: 'postgres',
      dialect,
      executor,
      capabilities: {
        notifications: false,
        transactionalEnqueue: true,
        multiProcess: true,
      },
    });
    closing.push(store);
    const scope = 'raced';
    const limited = { scope, exclusive: true };
    // One running (R), a short queue in line, and behind it one blocked job (B).
    const jobs = (
      await store.enqueue(Array.from({ length: 102 }, () => newJob('work', limited)))
    ).map((r) => r.job);
    const [running] = await store.acquire(REQUEST);
    expect(running?.id).toBe(jobs[0]?.id);
    await store.bulk?.deleteMany({ scope, state: ['timer', 'async'] }, 1_000);
    const blocked = jobs[101] as Job;
    expect((await store.getJob(blocked.id))?.state).toBe('blocked');
    // J comes in a caller's transaction: no rebalance of its own, it waits in line behind B.
    const client = await pool.connect();
    let late: Job | undefined;
    try {
      await client.query('BEGIN');
      late = (await store.enqueue([newJob('work', limited)], { tx: client }))[0]?.job;
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    if (!late) throw new Error('nothing enqueued');
    expect((await store.getJob(late.id))?.state).toBe('async');

    // A rebalance reads (R running: no free slot, J behind B: block J); before its UPDATE, R
    // completes (that settle lets B in), B runs and completes (nothing is blocked then).
    executor.beforeBlock = async () => {
      await other.complete([refOf(running as Job)]);
      const [next] = await other.acquire(REQUEST);
      expect(next?.id).toBe(blocked.id);
      await other.complete([refOf(next as Job)]);
    };
    await store.rebalanceScopes([scope]);
    expect(executor.beforeBlock).toBeNull();

    // Nothing runs in the scope: J must be acquirable now, not after the next sweep.
    expect((await acquired(other)).map((job) => job.id)).toEqual([late.id]);
  });
});

function acquired(store: JobStore): Promise<Job[]> {
  return store.acquire(REQUEST);
}
