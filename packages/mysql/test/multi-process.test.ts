/**
 * Three engine processes on one database, one of them SIGKILLed mid-run: every job completes,
 * none runs twice except the killed process's unfinished ones (once more, after their lease),
 * a job running five leases long runs once, and the dead owner's jobs are taken over after
 * their lease ends and within about two leases.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeNewJob, waitFor } from '@jobs/conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, dropDatabase, MYSQL_URL, openStore, reachable, sql } from './helpers.js';

const worker = fileURLToPath(new URL('./fixtures/engine-worker.ts', import.meta.url));
const LEASE_MS = 800;
const JOBS = 2_000;

let database = '';
const children: ChildProcess[] = [];

function spawnEngine(
  owner: string,
  tablePrefix: string,
): { child: ChildProcess; ready: Promise<void>; exited: Promise<number | null> } {
  const child = fork(
    worker,
    [JSON.stringify({ uri: MYSQL_URL, database, tablePrefix, owner, leaseMs: LEASE_MS })],
    {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  children.push(child);
  const ready = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`engine ${owner} exited early (${code})`)));
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  return { child, ready, exited };
}

describe.skipIf(!reachable)('@jobs/mysql with three engine processes', () => {
  beforeAll(async () => {
    database = await createDatabase();
    await sql(
      `CREATE TABLE \`${database}\`.runs (n BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, owner VARCHAR(64) NOT NULL, started_at DATETIME(3) NOT NULL)`,
    );
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    if (database) await dropDatabase(database);
  });

  it('one SIGKILLed mid-run: every job completes, none twice, a 5-lease job runs once, takeover after the lease', async () => {
    const tablePrefix = 'mp_';
    const client = openStore(database, { tablePrefix });
    await client.migrate();
    const engines = ['engine-0', 'engine-1', 'engine-2'].map((owner) => ({
      owner,
      ...spawnEngine(owner, tablePrefix),
    }));
    await Promise.all(engines.map((e) => e.ready));

    const enqueued = await client.enqueue(
      Array.from({ length: JOBS }, (_, i) => makeNewJob({ type: 'work', payload: { i } })),
    );
    const victim = engines[0]!;
    await waitFor(
      'the victim to run some jobs',
      async () => {
        const rows = await sql(`SELECT COUNT(*) AS n FROM \`${database}\`.runs WHERE owner = ?`, [
          victim.owner,
        ]);
        return Number(rows[0]?.n) >= 100;
      },
      60_000,
      25,
    );
    victim.child.kill('SIGKILL');
    await victim.exited;
    // What the dead owner held (started or prefetched), with the lease it held them under.
    const held = await sql(
      `SELECT id, lock_expires_at FROM ${client.tables.jobs} WHERE lock_owner = ?`,
      [victim.owner],
    );
    const [long] = await client.enqueue([makeNewJob({ type: 'long' })]);

    await waitFor(
      'every job to finish',
      async () => (await client.listJobs({ limit: 1, offset: 0 })).length === 0,
      60_000,
      25,
    );

    const runs = await sql(`SELECT job_id, owner, started_at FROM \`${database}\`.runs ORDER BY n`);
    const byJob = new Map<string, { owner: string; startedAt: Date }[]>();
    for (const r of runs) {
      const id = String(r.job_id);
      const list = byJob.get(id) ?? [];
      list.push({
        owner: String(r.owner),
        startedAt: new Date(`${String(r.started_at).replace(' ', 'T')}Z`),
      });
      byJob.set(id, list);
    }
    // Every job ran (and, the table being empty, completed: no deadletter rows either).
    for (const { job } of enqueued) expect(byJob.has(job.id), `job ${job.id} ran`).toBe(true);
    expect(byJob.get(long!.job.id)).toHaveLength(1);

    const heldIds = new Map(
      held.map((r) => [String(r.id), new Date(`${String(r.lock_expires_at).replace(' ', 'T')}Z`)]),
    );
    const takeoverDelays: number[] = [];
    for (const [id, list] of byJob) {
      if (list.length === 1) continue;
      // Only a job the dead engine held may run again, once, by a survivor, after the lease.
      expect(list, `job ${id} runs`).toHaveLength(2);
      expect(list[0]!.owner).toBe(victim.owner);
      expect(list[1]!.owner).not.toBe(victim.owner);
      const expiry = heldIds.get(id);
      expect(expiry, `job ${id} was held by the victim at the kill`).toBeDefined();
      expect(list[1]!.startedAt.getTime()).toBeGreaterThanOrEqual(expiry!.getTime());
      takeoverDelays.push(list[1]!.startedAt.getTime() - expiry!.getTime());
    }
    // The victim held jobs (it was killed mid-run) and survivors took them over within about
    // two leases after each lease ended (recovery runs every half lease); generous for slow CI.
    expect(heldIds.size).toBeGreaterThan(0);
    for (const delay of takeoverDelays) expect(delay).toBeLessThan(LEASE_MS * 4);
    if (process.env.JOBS_TEST_VERBOSE) {
      console.log({
        held: heldIds.size,
        rerun: takeoverDelays.length,
        maxTakeoverMs: Math.max(...takeoverDelays),
      });
    }

    await Promise.all(
      engines.slice(1).map(async (e) => {
        e.child.send('stop');
        expect(await e.exited).toBe(0);
      }),
    );
    await client.close();
  });
});
