/**
 * Chaos for durable workflows (issue 25): engine processes running workflow jobs — plain steps, a
 * fenced `{ transaction: true }` step, a durable sleep and a child job — are SIGKILLed mid-run
 * over several rounds while the others (and fresh ones) take over. At the end every workflow
 * completed, every plain step's function ran at least once, the fenced step's row exists exactly
 * once per workflow, every child completed exactly once and its parent got its result, and no
 * step's function started without its worker holding the lease with its deadline ahead. On
 * PostgreSQL, MySQL/MariaDB and SQLite (processes sharing one file).
 *
 * The children run the built packages (`dist`): build first (`pnpm build`; CI builds before
 * testing).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeNewJob, missingBuild, waitFor } from '@jobs/conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type Place, type SqlStore } from './databases.js';

const WORKER = fileURLToPath(new URL('./fixtures/workflow-worker.ts', import.meta.url));
const LEASE_MS = 1_000;
const WORKFLOWS = 8;
const WORKERS = 3;
const ROUNDS = 4;
const PLAIN_STEPS = ['a', 'b', 'c'];
const unbuilt = missingBuild(
  ['core', 'postgres', 'mysql', 'sqlite'].map(
    (pkg) => new URL(`../../${pkg}/dist/index.js`, import.meta.url),
  ),
);

/** The tables the workers write, in each database's types. */
function tables(name: string, table: (name: string) => string): string[] {
  const text = name === 'mysql' ? 'VARCHAR(255)' : 'TEXT';
  const int = name === 'postgres' ? 'bigint' : 'BIGINT';
  return [
    `CREATE TABLE ${table('step_runs')} (job_id ${text} NOT NULL, step ${text} NOT NULL, pid ${int} NOT NULL, lease_ok ${int} NOT NULL, at_ms ${int} NOT NULL)`,
    `CREATE TABLE ${table('effects')} (job_id ${text} NOT NULL, pid ${int} NOT NULL)`,
    `CREATE TABLE ${table('child_runs')} (child_id ${text} NOT NULL, parent_id ${text} NOT NULL, pid ${int} NOT NULL)`,
  ];
}

describe.each(DATABASES)('$name: workflow workers SIGKILLed mid-workflow', (db) => {
  const missing = db.missing ?? unbuilt;
  const children: ChildProcess[] = [];
  let place: Place;
  let store: SqlStore;
  let started = 0;

  /** A new worker process; resolves once its engine started. */
  async function startWorker(): Promise<ChildProcess> {
    const owner = `wf-worker-${++started}`;
    const args = { target: place.target, owner, leaseMs: LEASE_MS };
    const child = fork(WORKER, [JSON.stringify(args)], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (d: Buffer) => {
        if (d.toString().includes('ready')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`worker ${owner} exited early (${code})`)));
    });
    return Object.assign(child, { owner });
  }

  const ownerOf = (child: ChildProcess): string =>
    (child as ChildProcess & { owner: string }).owner;
  const param = (i: number): string => (db.name === 'postgres' ? `$${i}` : '?');

  /** How many jobs `owner` holds now. */
  const heldBy = async (owner: string): Promise<number> =>
    (await place.sql(`SELECT id FROM ${place.jobs} WHERE lock_owner = ${param(1)}`, [owner]))
      .length;

  beforeAll(async () => {
    if (missing) return;
    place = await db.create();
    store = place.open();
    await store.migrate();
    for (const ddl of tables(db.name, place.table)) await place.sql(ddl);
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await store?.close();
    await place?.drop();
  });

  it.skipIf(missing)(
    'every workflow completes, fenced effects and children once, no step outside its lease',
    async () => {
      const live = await Promise.all(Array.from({ length: WORKERS }, () => startWorker()));
      const enqueued = await store.enqueue(
        // A kill costs the jobs its victim held an attempt each (a lease that expired): enough
        // retries that four rounds of kills cannot dead-letter one.
        Array.from({ length: WORKFLOWS }, () =>
          makeNewJob({ type: 'wf', payload: {}, retries: ROUNDS * 2 }),
        ),
      );
      const ids = enqueued.map((e) => e.job.id);

      // Each round: kill a worker while it holds a job (so the kill lands mid-workflow), and
      // start a fresh one in its place.
      let killedHolding = 0;
      for (let round = 0; round < ROUNDS; round++) {
        await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 300));
        const victim = await waitFor(
          `round ${round}: a worker holding a job, or every job done`,
          async () => {
            const order = [...live].sort(() => Math.random() - 0.5);
            for (const child of order) if ((await heldBy(ownerOf(child))) > 0) return child;
            const left = await store.listJobs({ limit: 1, offset: 0 });
            return left.length === 0 ? 'done' : false;
          },
          20_000,
          5,
        );
        if (victim === 'done') break;
        victim.kill('SIGKILL');
        killedHolding++;
        live[live.indexOf(victim)] = await startWorker();
      }
      // A kill that never hit a running workflow proves nothing.
      expect(killedHolding).toBeGreaterThan(0);

      await waitFor(
        'every workflow and child to finish',
        async () => (await store.listJobs({ limit: 1, offset: 0 })).length === 0,
        30_000,
        50,
      ).catch(async (error: unknown) => {
        const left = await place.sql(
          `SELECT id, type, state, attempts, last_error_message, steps FROM ${place.jobs} ORDER BY id`,
        );
        throw new Error(`${String(error)}; left: ${JSON.stringify(left)}`);
      });

      // Every workflow completed.
      for (const id of ids) {
        expect((await store.history?.get(id))?.outcome, `workflow ${id}`).toBe('completed');
      }
      // Every plain step's function ran at least once per workflow, and every run of it started
      // while its worker held the job's lease with the deadline ahead.
      const runs = await place.sql(
        `SELECT job_id, step, lease_ok FROM ${place.table('step_runs')}`,
      );
      for (const id of ids) {
        for (const step of PLAIN_STEPS) {
          const ran = runs.filter((r) => String(r.job_id) === id && r.step === step);
          expect(ran.length, `${id} step ${step}`).toBeGreaterThanOrEqual(1);
        }
        // The parent got its child's result, every time it read it.
        const seen = runs.filter(
          (r) => String(r.job_id) === id && String(r.step).startsWith('after:'),
        );
        expect(seen.length, `${id} after`).toBeGreaterThanOrEqual(1);
        for (const r of seen) expect(r.step).toBe(`after:${JSON.stringify({ parent: id })}`);
      }
      const outsideLease = runs.filter((r) => Number(r.lease_ok) !== 1);
      expect(outsideLease).toEqual([]);

      // The fenced step's effect: exactly one row per workflow.
      const effects = await place.sql(`SELECT job_id FROM ${place.table('effects')}`);
      expect(effects.map((r) => String(r.job_id)).sort()).toEqual([...ids].sort());

      // Every child completed once (its row is written by a fenced step: once per child),
      // one child per workflow.
      const childRuns = await place.sql(
        `SELECT child_id, parent_id FROM ${place.table('child_runs')}`,
      );
      expect(childRuns.map((r) => String(r.parent_id)).sort()).toEqual([...ids].sort());
      expect(new Set(childRuns.map((r) => String(r.child_id))).size).toBe(WORKFLOWS);
      for (const r of childRuns) {
        expect((await store.history?.get(String(r.child_id)))?.outcome).toBe('completed');
      }

      for (const c of live) c.kill('SIGTERM');
      await Promise.all(live.map((c) => new Promise((resolve) => c.once('exit', resolve))));
    },
    60_000,
  );
});
