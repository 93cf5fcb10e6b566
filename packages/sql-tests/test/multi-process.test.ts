/**
 * Three engine processes on one database run 2,000 jobs while one of them is SIGKILLed mid-run:
 * every job completes, none runs twice among live owners (only a job the killed process held
 * runs again, or one whose owner's lease lapsed and was recovered: a process starved past its
 * lease), a job running five leases long runs to the end once (its lease renewed all along; a
 * run a starved renewal lost is aborted first), and the killed process's jobs are taken over
 * within a few leases. On PostgreSQL and MySQL/MariaDB (SQLite's processes share a file:
 * `packages/sqlite/test/multi-process.test.ts`). Was
 * `packages/{postgres,mysql}/test/multi-process.test.ts`.
 *
 * The children run the built packages (`dist`): build first (`pnpm build`; CI builds before
 * testing).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeNewJob, missingBuild, waitFor } from '@jobs/conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databases, type Place, type SqlStore } from './databases.js';

const WORKER = fileURLToPath(new URL('./fixtures/engine-worker.ts', import.meta.url));
// Two seconds: with one, a two-core machine loaded by the rest of the suite starved a 20 ms
// job's process past its lease now and then, and a second owner ran it (at least once, as
// a lapsed lease allows; this test is about the owners that stay healthy).
const LEASE_MS = 2_000;
const JOBS = 2_000;
/**
 * Each wait's bound, and the test's own above both: ~11 s on an idle machine, but the long job
 * (five leases) starts again after each renewal a loaded machine starved, so a slow run must
 * end in a wait's message (what was left), not in vitest's bare timeout.
 */
const WAIT_MS = 90_000;
const unbuilt = missingBuild(
  ['core', 'postgres', 'mysql'].map(
    (pkg) => new URL(`../../${pkg}/dist/index.js`, import.meta.url),
  ),
);

/** The runs table the workers write: one row per end of a run (and start of a `long` one). */
const RUNS = {
  postgres: (runs: string) =>
    `CREATE TABLE ${runs} (job_id bigint NOT NULL, pid int NOT NULL, phase text NOT NULL, at_ms bigint NOT NULL)`,
  mysql: (runs: string) =>
    `CREATE TABLE ${runs} (job_id BIGINT NOT NULL, pid INT NOT NULL, phase VARCHAR(8) NOT NULL, at_ms BIGINT NOT NULL)`,
} as const;

describe.each(databases('postgres', 'mysql'))(
  '$name: three engine processes, one SIGKILLed',
  (db) => {
    const missing = db.missing ?? unbuilt;
    const children: ChildProcess[] = [];
    let place: Place;
    let store: SqlStore;

    function startWorker(
      owner: string,
      types: string[],
    ): { child: ChildProcess; ready: Promise<void> } {
      const args = { target: place.target, owner, types, leaseMs: LEASE_MS };
      const child = fork(WORKER, [JSON.stringify(args)], {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      });
      children.push(child);
      const ready = new Promise<void>((resolve, reject) => {
        child.stdout?.on('data', (d: Buffer) => {
          if (d.toString().includes('ready')) resolve();
        });
        child.on('exit', (code) => reject(new Error(`worker ${owner} exited early (${code})`)));
      });
      return { child, ready };
    }

    /** Ids of the jobs `owner` holds now. */
    const heldBy = async (owner: string): Promise<string[]> =>
      (
        await place.sql(
          `SELECT id FROM ${place.jobs} WHERE lock_owner = ${db.name === 'postgres' ? '$1' : '?'}`,
          [owner],
        )
      ).map((r) => String(r.id));

    beforeAll(async () => {
      if (missing) return;
      place = await db.create();
      store = place.open();
      await store.migrate();
      await place.sql(RUNS[db.name as keyof typeof RUNS](place.table('runs')));
    });
    afterAll(async () => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      await store?.close();
      await place?.drop();
    });

    it.skipIf(missing)(
      'runs every job, none twice by live owners, and takes over the dead owner’s jobs',
      async () => {
        const [long] = await store.enqueue([
          makeNewJob({ type: 'long', payload: { ms: LEASE_MS * 5 } }),
        ]);
        await store.enqueue(
          Array.from({ length: JOBS }, (_, i) =>
            makeNewJob({ type: 'work', payload: { ms: 15 + (i % 10) } }),
          ),
        );
        // The victim only runs 'work', so the long job provably runs on a survivor.
        const workers = [
          startWorker('victim', ['work']),
          startWorker('survivor-1', ['work', 'long']),
          startWorker('survivor-2', ['work', 'long']),
        ];
        await Promise.all(workers.map((w) => w.ready));
        const victim = workers[0]?.child as ChildProcess;
        const runs = place.table('runs');
        const param = db.name === 'postgres' ? '$1' : '?';

        // Kill the victim once it is well into the run and holding jobs.
        await waitFor(
          'the victim to finish 150 jobs and hold some',
          async () => {
            const [row] = await place.sql(
              `SELECT count(*) AS n FROM ${runs} WHERE pid = ${param}`,
              [victim.pid],
            );
            return Number(row?.n) >= 150 && (await heldBy('victim')).length > 0;
          },
          WAIT_MS,
          10,
        );
        victim.kill('SIGKILL');
        const killedAt = Date.now();
        // What it held at the moment of death (it cannot acquire more now).
        const held = await heldBy('victim');
        expect(held.length).toBeGreaterThan(0);

        // What is left while it waits, for the message if it never ends.
        let left = '';
        await waitFor(
          'every job to finish',
          async () => {
            const rows = await place.sql(
              `SELECT type, state, lock_owner, count(*) AS n FROM ${place.jobs} GROUP BY type, state, lock_owner`,
            );
            const longPhases = await place.sql(
              `SELECT phase FROM ${runs} WHERE job_id = ${param} ORDER BY at_ms`,
              [long?.job.id],
            );
            left = `${JSON.stringify(rows)}; the long job's runs: ${longPhases.map((r) => r.phase).join(',')}`;
            return rows.length === 0;
          },
          WAIT_MS,
          50,
        ).catch((error: unknown) => {
          throw new Error(`${(error as Error).message}; left: ${left}`);
        });

        const ends = await place.sql(`SELECT job_id, pid, at_ms FROM ${runs} WHERE phase = 'end'`);
        const byJob = new Map<string, { pid: number; at: number }[]>();
        for (const e of ends) {
          const id = String(e.job_id);
          byJob.set(id, [...(byJob.get(id) ?? []), { pid: Number(e.pid), at: Number(e.at_ms) }]);
        }
        // Every job ran to the end at least once…
        expect(byJob.size).toBe(JOBS + 1);
        // …never twice among live owners, and twice only when the victim held it (a job it
        // finished but had not yet marked complete when it died runs again) or a live owner's
        // lease lapsed: lease recovery requeued the job and the owner that ended it first lost
        // its lease (a process the loaded machine starved past its lease after its handler's last
        // look at the signal: the `work` handler writes its end after that look, with nothing to
        // fence the write). A second live lease without a lapse — two owners at once, or a
        // recovery of a lease its owner kept — fails here.
        const heldSet = new Set(held);
        const twice = [...byJob].filter(
          ([id, list]) =>
            list.filter((r) => r.pid !== victim.pid).length > 1 ||
            (list.length > 1 && !heldSet.has(id)),
        );
        /**
         * The jobs run twice whose lease lapsed: requeued, and lost by a live owner that ended
         * it.
         */
        const lapsedOf = async (): Promise<Set<string>> => {
          const notes = await place.sql(
            `SELECT job_id, pid, phase FROM ${runs} WHERE phase IN ('requeued', 'lost')`,
          );
          const lapsed = new Set<string>();
          for (const [id, list] of twice) {
            const of = notes.filter((n) => String(n.job_id) === id);
            const requeued = of.some((n) => n.phase === 'requeued');
            const lostBy = new Set(of.filter((n) => n.phase === 'lost').map((n) => Number(n.pid)));
            if (requeued && list.some((r) => r.pid !== victim.pid && lostBy.has(r.pid)))
              lapsed.add(id);
          }
          return lapsed;
        };
        // The notes are written as the engines learn of a lapse (a rejected completion can come
        // after the job finished elsewhere): wait for those of the jobs run twice.
        const lapsed = twice.length
          ? await waitFor(
              'the lapsed-lease notes of the jobs run twice',
              async () => {
                const ids = await lapsedOf();
                return ids.size === twice.length && ids;
              },
              10_000,
              50,
            ).catch(() => lapsedOf())
          : new Set<string>();
        const runsOf = async (id: string) =>
          (
            await place.sql(
              `SELECT pid, phase, at_ms FROM ${runs} WHERE job_id = ${param} ORDER BY at_ms`,
              [id],
            )
          )
            .map(
              (r) => `${r.phase}@${r.at_ms} by ${Number(r.pid) === victim.pid ? 'victim' : r.pid}`,
            )
            .join(', ');
        for (const [id] of twice) {
          if (!lapsed.has(id))
            expect.fail(`job ${id} ran twice without a lapsed lease: ${await runsOf(id)}`);
          console.warn(`[${db.name}] job ${id}'s lease lapsed: ${await runsOf(id)}`);
        }
        // The long job (5× the lease) ran to the end once, its lease renewed all along. A loaded
        // machine can starve a renewal past the lease: the engine then aborts the run before the
        // lease ends and the job starts again, so every start but the last must have been aborted.
        const longRuns = await place.sql(
          `SELECT phase FROM ${runs} WHERE job_id = ${param} ORDER BY at_ms`,
          [long?.job.id],
        );
        const phases = longRuns.map((r) => String(r.phase));
        const starts = phases.filter((p) => p === 'start').length;
        expect(
          phases.filter((p) => p === 'end'),
          phases.join(','),
        ).toHaveLength(1);
        expect(
          phases.filter((p) => p === 'abort'),
          phases.join(','),
        ).toHaveLength(starts - 1);
        if (starts > 1)
          console.warn(`[${db.name}] the long job's lease lapsed ${starts - 1} time(s): ${phases}`);

        // Takeover: every job the victim held ran to the end elsewhere, within a few leases of
        // the kill (about two leases plus recovery polling; generous for a loaded CI machine).
        const lastTakeover = Math.max(
          ...held.map((id) => byJob.get(id)?.find((r) => r.pid !== victim.pid)?.at ?? Infinity),
        );
        expect(lastTakeover - killedAt).toBeLessThan(LEASE_MS * 8);
        if (process.env.JOBS_TEST_VERBOSE) {
          console.log(
            `[${db.name}] victim held ${held.length}; taken over in ${lastTakeover - killedAt} ms`,
          );
        }

        for (const w of workers.slice(1)) w.child.kill('SIGTERM');
        await Promise.all(
          workers.slice(1).map((w) => new Promise((resolve) => w.child.once('exit', resolve))),
        );
      },
      2 * WAIT_MS + 30_000,
    );
  },
);
