/**
 * The binary against one database: every command, its `--json`, and its errors. The test sets
 * jobs up through the store (and runs them with a real engine for `tail`); the binary runs as a
 * child process on the same tables. Each test starts from empty tables.
 */

import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { itIfAvailable, makeNewJob } from '@jobs/conformance';
import {
  type Job,
  JobEngine,
  type JobStore,
  type NewJob,
  silentLogger,
  UnrecoverableError,
} from '@jobs/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Backend } from './backends.js';
import { BIN, jobs, json, ok, RunningCli, run, shellQuote } from './cli.js';

/** Stderr of a failed command: exactly one line, no stack. */
function oneLine(stderr: string): string {
  const lines = stderr.trimEnd().split('\n');
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  return lines[0] as string;
}

/**
 * @param full also run what does not depend on the database (every filter option, usage errors
 * of the bulk actions); one database file does, the others keep to what talks to the database.
 */
export function cliSuite(backend: Backend | null, name: string, full = false): void {
  describe.skipIf(backend === null)(`jobsctl binary on ${name}`, () => {
    const b = backend as Backend;
    let store: JobStore;
    let db: string[];

    beforeAll(async () => {
      await b.create();
      db = b.args();
      // The binary creates the schema: every other test works on what it made. It says what
      // it applied: every migration from the first to the newest.
      const created = await ok(['migrate', ...db]);
      const [, last, version] =
        /: applied migrations 1–(\d+) \(.*\); the @jobs schema is at version (\d+)\n$/.exec(
          created,
        ) ?? [];
      expect(last, created).toBeDefined();
      expect(last).toBe(version);
      store = await b.openStore();
      // The test's store runs from source: a migration not built into the binary yet (a local
      // run between builds) must not break the test's own reads.
      await store.migrate();
    });

    afterAll(async () => {
      await store?.close();
      await b.drop();
    });

    beforeEach(async () => {
      for (const job of await store.listJobs({ limit: 1000, offset: 0 })) {
        // A running job is not deleted (only flagged): its holder's token ends it.
        if (job.state === 'running' && job.lockToken) {
          await store.cancellation?.cancelHeld([{ id: job.id, token: job.lockToken }]);
        } else {
          await store.deleteJob(job.id);
        }
      }
      for (const schedule of await store.listSchedules()) {
        await store.deleteSchedule(schedule.name);
      }
    });

    const enqueue = async (list: Partial<NewJob>[]): Promise<Job[]> =>
      (await store.enqueue(list.map((job) => makeNewJob(job)))).map((r) => r.job);

    /** Leases the due jobs of `type` to `owner`. */
    const acquire = (type: string, owner = 'test-owner', limit = 100): Promise<Job[]> =>
      store.acquire({ owner, limit, leaseMs: 60_000, types: [type], queues: null, tenants: null });

    /** `count` jobs of `type` in the dead-letter area, with an error and stack. */
    const deadJobs = async (type: string, count: number, extra: Partial<NewJob> = {}) => {
      const made = await enqueue(Array.from({ length: count }, () => ({ type, ...extra })));
      const held = await acquire(type, 'test-owner', count);
      await store.fail(
        held.map((job) => ({
          id: job.id,
          token: job.lockToken as string,
          error: { message: 'smtp down', stack: 'Error: smtp down\n    at send (mailer.js:1:1)' },
          deadletter: true,
          retryDelayMs: 0,
        })),
      );
      return made;
    };

    const ids = async (args: string[]): Promise<string[]> =>
      (await json<Job[]>(['list', ...db, ...args])).map((job) => job.id);

    it('migrate is idempotent, and --print-sql prints the schema without connecting', async () => {
      expect(await ok(['migrate', ...db])).toMatch(
        /: the @jobs schema is up to date at version \d+ \(.*\); nothing applied\n$/,
      );
      const sql = await ok(['migrate', '--print-sql', ...db]);
      expect(sql).toMatch(/CREATE TABLE/i);
      expect(sql).toMatch(/jobs_migrations/);
      if (b.unreachableArgs) {
        // Nothing listens there: printing works all the same.
        expect(await ok(['migrate', '--print-sql', ...b.unreachableArgs])).toBe(
          await ok(['migrate', '--print-sql', ...b.unreachableArgs]),
        );
      }
    });

    it('status counts per queue, type and state, the oldest waiting job, running jobs per owner and overdue types', async () => {
      const now = (await store.now()).getTime();
      const fiveMinutesAgo = new Date(now - 300_000);
      await enqueue([
        { type: 'email', queue: 'mail', dueAt: fiveMinutesAgo },
        { type: 'email', queue: 'mail', dueAt: fiveMinutesAgo },
        { type: 'email', queue: 'mail', delayMs: 3_600_000 },
        { type: 'report', queue: 'reports' },
      ]);
      await deadJobs('sms', 1, { queue: 'mail' });
      expect(await acquire('report', 'worker-1')).toHaveLength(1);

      const report = await json<{
        total: number;
        byState: Record<string, number>;
        queues: unknown[];
        oldestWaiting: { queue: string; type: string; dueAt: string; ageMs: number } | null;
        owners: { owner: string; running: number; expired: number }[];
        overdue: { type: string; count: number }[];
      }>(['status', ...db]);
      const counts = (over: Record<string, number>) => ({
        timer: 0,
        async: 0,
        blocked: 0,
        running: 0,
        deadletter: 0,
        suspended: 0,
        ...over,
      });
      expect(report.total).toBe(5);
      expect(report.byState).toEqual(counts({ timer: 1, async: 2, running: 1, deadletter: 1 }));
      expect(report.queues).toEqual([
        {
          queue: 'mail',
          type: 'email',
          counts: counts({ timer: 1, async: 2 }),
          due: 2,
          oldestDueAt: fiveMinutesAgo.toISOString(),
        },
        {
          queue: 'mail',
          type: 'sms',
          counts: counts({ deadletter: 1 }),
          due: 0,
          oldestDueAt: null,
        },
        {
          queue: 'reports',
          type: 'report',
          counts: counts({ running: 1 }),
          due: 0,
          oldestDueAt: null,
        },
      ]);
      expect(report.oldestWaiting).toMatchObject({
        queue: 'mail',
        type: 'email',
        dueAt: fiveMinutesAgo.toISOString(),
      });
      expect(report.oldestWaiting!.ageMs).toBeGreaterThanOrEqual(300_000);
      expect(report.owners).toMatchObject([{ owner: 'worker-1', running: 1, expired: 0 }]);
      expect(report.overdue).toMatchObject([{ type: 'email', count: 2 }]);

      const text = await ok(['status', ...db]);
      expect(text).toMatch(
        /Jobs: 5 \(timer 1, async 2, blocked 0, running 1, deadletter 1, suspended 0\)/,
      );
      expect(text).toMatch(/Oldest waiting job: due 5m .*ago \(queue mail, type email\)/);
      expect(text).toMatch(/^mail\s+email\s+1\s+2\s+0\s+0\s+0\s+0\s+2\s+5m/m);
      expect(text).toMatch(/^worker-1\s+1\s+in \d+s/m);
      expect(text).toMatch(/Waiting over a minute[^\n]*\n[^\n]*\nemail\s+2/);
    });

    it('status counts blocked jobs in BLOCKED, not in DUE (they wait for a slot of their scope, not for a worker)', async () => {
      // A long queue into an exclusive scope whose first job runs: beyond the short queue a
      // store keeps in line, the rest waits blocked; the queue in line is deleted.
      await enqueue(
        Array.from({ length: 151 }, () => ({ type: 'sync', scope: 'acct-1', exclusive: true })),
      );
      expect(await acquire('sync', 'worker-1', 1)).toHaveLength(1);
      if (!store.bulk) throw new Error('the test needs JobStore.bulk');
      await store.bulk.deleteMany({ scope: 'acct-1', state: ['timer', 'async'] }, 1_000);
      const report = await json<{
        queues: {
          type: string;
          counts: Record<string, number>;
          due: number;
          oldestDueAt: string | null;
        }[];
      }>(['status', ...db]);
      const [sync] = report.queues;
      expect(report.queues).toHaveLength(1);
      expect(sync?.counts.blocked).toBeGreaterThan(0);
      expect(sync?.counts).toMatchObject({ timer: 0, async: 0, running: 1 });
      expect(sync?.due).toBe(0);
      expect(sync?.oldestDueAt).toBeNull();
      const blocked = String(sync?.counts.blocked);
      expect(await ok(['status', ...db])).toMatch(
        new RegExp(`^default\\s+sync\\s+0\\s+0\\s+${blocked}\\s+1\\s+0\\s+0\\s+0\\s+-$`, 'm'),
      );
    });

    it('list filters by state, type, queue, scope, tenant and schedule, and pages with --limit and --offset', async () => {
      const made = await enqueue([
        { type: 'a', queue: 'q1', scope: 's1', tenantId: 't1' },
        { type: 'a', delayMs: 3_600_000 },
        { type: 'b', queue: 'q1', schedule: 'nightly' },
        { type: 'b', tenantId: 't1' },
        { type: 'c' },
        { type: 'c' },
        { type: 'c' },
      ]);
      const all = made.map((job) => job.id);
      const [a1, a2, b1, b2] = all;
      expect(await ids([])).toEqual(all);
      expect(await ids(['--state', 'timer,async', '--tenant', 't1'])).toEqual([a1, b2]);
      expect(await ids(['--limit', '2', '--offset', '2'])).toEqual(all.slice(2, 4));
      if (full) {
        expect(await ids(['--state', 'timer'])).toEqual([a2]);
        expect(await ids(['--state', 'deadletter'])).toEqual([]);
        expect(await ids(['--type', 'a'])).toEqual([a1, a2]);
        expect(await ids(['--queue', 'q1'])).toEqual([a1, b1]);
        expect(await ids(['--scope', 's1'])).toEqual([a1]);
        expect(await ids(['--schedule', 'nightly'])).toEqual([b1]);
        expect(await ids(['--type', 'b', '--tenant', 't1'])).toEqual([b2]);
        expect(await ids(['--offset', '7'])).toEqual([]);
        expect((await jobs(['list', ...db, '--limit', '0'])).code).toBe(2);
      }

      const text = await ok(['list', ...db, '--type', 'c', '--limit', '2']);
      expect(text).toMatch(/^\s*ID\s+TYPE\s+STATE\s+QUEUE\s+DUE/m);
      expect(text).toMatch(new RegExp(`^\\s*${all[4]}\\s+c\\s+async\\s+default\\s+`, 'm'));
      expect(text).toMatch(/2 jobs \(1–2\); next page: --offset 2/);
      expect(await ok(['list', ...db, '--type', 'nothing'])).toBe('no jobs match\n');
    });

    it('show prints every field, the payload as indented JSON and the last error with its stack', async () => {
      const [job] = await deadJobs('email', 1, {
        payload: { to: 'a@b.c', lines: [1, 2] },
        scope: 'acct-1',
        tenantId: 'acme',
      });
      const text = await ok(['show', job!.id, ...db]);
      expect(text).toMatch(new RegExp(`^Job ${job!.id}$`, 'm'));
      expect(text).toMatch(/^\s+type\s+email$/m);
      expect(text).toMatch(/^\s+state\s+deadletter$/m);
      expect(text).toMatch(/^\s+scope\s+acct-1$/m);
      expect(text).toMatch(/^\s+tenant\s+acme$/m);
      expect(text).toMatch(/^\s+attempts\s+1$/m);
      expect(text).toContain(
        'Payload:\n  {\n    "to": "a@b.c",\n    "lines": [\n      1,\n      2\n    ]\n  }',
      );
      expect(text).toContain('Last error:\n  smtp down');
      expect(text).toContain('at send (mailer.js:1:1)');

      expect(await json(['show', job!.id, ...db])).toMatchObject({
        id: job!.id,
        type: 'email',
        state: 'deadletter',
        payload: { to: 'a@b.c', lines: [1, 2] },
        lastError: { message: 'smtp down' },
      });

      for (const id of ['99999999', 'abc']) {
        const missing = await jobs(['show', id, ...db]);
        expect(missing.code).toBe(1);
        expect(oneLine(missing.stderr)).toMatch(new RegExp(`job ${id} does not exist`));
      }
    });

    it('show and list print a scope with its limit: limit N, exclusive for 1, nothing without', async () => {
      const [limited, exclusive, unlimited] = await enqueue([
        { type: 'sync', scope: 'customer-42', scopeLimit: 2 },
        { type: 'sync', scope: 'customer-42', exclusive: true, scopeLimit: 1 },
        { type: 'sync', scope: 'customer-7' },
      ]);
      const scopeLine = async (id: string): Promise<string | undefined> =>
        (await ok(['show', id, ...db])).match(/^\s+scope\s+(.*)$/m)?.[1];
      expect(await scopeLine(limited!.id)).toBe('customer-42 (limit 2)');
      expect(await scopeLine(exclusive!.id)).toBe('customer-42 (exclusive)');
      expect(await scopeLine(unlimited!.id)).toBe('customer-7');
      expect(await json(['show', limited!.id, ...db])).toMatchObject({
        scope: 'customer-42',
        exclusive: false,
        scopeLimit: 2,
      });
      expect(await json(['show', exclusive!.id, ...db])).toMatchObject({
        exclusive: true,
        scopeLimit: 1,
      });
      expect(await json(['show', unlimited!.id, ...db])).toMatchObject({
        exclusive: false,
        scopeLimit: null,
      });

      const listed = await json<Job[]>(['list', ...db, '--type', 'sync']);
      expect(listed.map((job) => [job.id, job.scopeLimit])).toEqual([
        [limited!.id, 2],
        [exclusive!.id, 1],
        [unlimited!.id, null],
      ]);
      const text = await ok(['list', ...db, '--type', 'sync']);
      expect(text).toMatch(
        new RegExp(`^\\s*${limited!.id}\\s.*\\scustomer-42 \\(limit 2\\)\\s+-$`, 'm'),
      );
      expect(text).toMatch(
        new RegExp(`^\\s*${exclusive!.id}\\s.*\\scustomer-42 \\(exclusive\\)\\s+-$`, 'm'),
      );
      expect(text).toMatch(new RegExp(`^\\s*${unlimited!.id}\\s.*\\scustomer-7\\s+-$`, 'm'));
    });

    it('cancel <id> removes a waiting job, flags a running one (show prints it with its progress), and says when a job already finished', async () => {
      const [waiting, running] = await enqueue([{ type: 'email' }, { type: 'report' }]);
      expect(await ok(['cancel', waiting!.id, ...db])).toBe(
        `cancelled job ${waiting!.id} (email): removed from async\n`,
      );
      expect(await store.getJob(waiting!.id)).toBeNull();
      const again = await jobs(['cancel', waiting!.id, ...db]);
      expect(again.code).toBe(1);
      expect(oneLine(again.stderr)).toMatch(
        new RegExp(`job ${waiting!.id} already finished \\(cancelled\\): nothing to cancel`),
      );

      const [held] = await acquire('report', 'worker-7');
      const ref = { id: held!.id, token: held!.lockToken as string };
      await store.renewLeases('worker-7', 60_000, [
        { ...ref, progressJson: JSON.stringify({ done: 2, total: 5 }) },
      ]);
      expect(await json(['cancel', running!.id, ...db])).toEqual({
        id: running!.id,
        type: 'report',
        outcome: 'requested',
      });
      const text = await ok(['show', running!.id, ...db]);
      expect(text).toMatch(/^\s+cancel requested\s+yes$/m);
      expect(text).toContain('Progress:\n  {\n    "done": 2,\n    "total": 5\n  }');
      expect(await json(['show', running!.id, ...db])).toMatchObject({
        cancelRequested: true,
        progress: { done: 2, total: 5 },
      });
      expect(await store.renewLeases('worker-7', 60_000, [ref])).toEqual({
        lost: [],
        cancelRequested: [running!.id],
      });

      const unknown = await jobs(['cancel', '99999999', ...db]);
      expect(unknown.code).toBe(1);
      expect(oneLine(unknown.stderr)).toMatch(/job 99999999 does not exist/);
    });

    it('retry <id> revives a dead-letter job; a job not in deadletter or unknown fails with exit code 1', async () => {
      const [job] = await deadJobs('email', 1);
      expect(await ok(['retry', job!.id, ...db])).toBe(
        `retried job ${job!.id} (email): async, 3 retries\n`,
      );
      expect(await store.getJob(job!.id)).toMatchObject({ state: 'async', retriesLeft: 3 });
      const again = await jobs(['retry', job!.id, ...db]);
      expect(again.code).toBe(1);
      expect(oneLine(again.stderr)).toMatch(/is async; only deadletter jobs can be retried/);
      const unknown = await jobs(['retry', '99999999', ...db]);
      expect(unknown.code).toBe(1);
      expect(oneLine(unknown.stderr)).toMatch(/job 99999999 does not exist/);
    });

    it('retry --all retries every matching dead-letter job once, after a --dry-run that changes nothing', async () => {
      await deadJobs('email', 5);
      await deadJobs('sms', 2);
      expect(await json(['retry', '--all', '--type', 'email', '--dry-run', ...db])).toEqual({
        action: 'retry',
        matched: 5,
        done: 0,
        skipped: 0,
        dryRun: true,
      });
      expect(await ids(['--state', 'deadletter'])).toHaveLength(7);
      expect(await ok(['retry', '--all', '--state', 'deadletter', '--type', 'email', ...db])).toBe(
        'retried 5 jobs (state=deadletter type=email)\n',
      );
      expect(await ids(['--state', 'async', '--type', 'email'])).toHaveLength(5);
      expect(await ids(['--state', 'deadletter', '--type', 'sms'])).toHaveLength(2);
      expect(await json(['retry', '--all', '--retries', '7', ...db])).toMatchObject({
        matched: 2,
        done: 2,
      });
      expect(
        (await store.listJobs({ type: 'sms', limit: 10, offset: 0 })).map((j) => j.retriesLeft),
      ).toEqual([7, 7]);
      for (const args of full
        ? [
            ['retry', '--all', '--state', 'async'],
            ['retry', '1', '--all'],
            ['retry'],
            ['retry', '1', '--type', 'email'],
          ]
        : []) {
        const result = await jobs([...args, ...db]);
        expect(result.code, args.join(' ')).toBe(2);
        oneLine(result.stderr);
      }
    });

    // Not about the database: run with one backend only. A missing `script` fails under CI=true.
    if (full) {
      itIfAvailable(
        existsSync('/usr/bin/script')
          ? null
          : 'no /usr/bin/script to run the binary on a pseudo-terminal: install it (`apt-get install bsdutils`)',
        'on a terminal, a bulk action draws a progress bar on stderr and clears it',
        {},
        async () => {
          await deadJobs('email', 3);
          // `script` runs the binary on a pseudo-terminal, as an operator's shell would.
          const command = [process.execPath, BIN, 'retry', '--all', ...db]
            .map(shellQuote)
            .join(' ');
          const result = await run('/usr/bin/script', ['-qec', command, '/dev/null']);
          expect(result.code).toBe(0);
          expect(result.stdout).toContain(`retry ${'█'.repeat(30)} 3/3`);
          expect(result.stdout).toContain('\x1b[2K');
          expect(result.stdout).toContain('retried 3 jobs (state=deadletter)');
        },
      );
    }

    it('delete removes one job by id, or every match with --all (after a --dry-run)', async () => {
      const old = await enqueue([
        { type: 'old' },
        { type: 'old', delayMs: 60_000 },
        { type: 'old' },
      ]);
      const [keep] = await enqueue([{ type: 'keep' }]);
      expect(await ok(['delete', '--all', '--type', 'old', '--dry-run', ...db])).toBe(
        'would delete 3 jobs (type=old); nothing changed (--dry-run)\n',
      );
      expect(await ids(['--type', 'old'])).toEqual(old.map((job) => job.id));
      expect(await json(['delete', '--all', '--type', 'old', ...db])).toEqual({
        action: 'delete',
        matched: 3,
        done: 3,
        skipped: 0,
        dryRun: false,
      });
      expect(await ids([])).toEqual([keep!.id]);
      expect(await ok(['delete', keep!.id, ...db])).toBe(`deleted job ${keep!.id}\n`);
      const gone = await jobs(['delete', keep!.id, ...db]);
      expect(gone.code).toBe(1);
      expect(oneLine(gone.stderr)).toMatch(new RegExp(`job ${keep!.id} does not exist`));
      const everything = await jobs(['delete', '--all', ...db]);
      expect(everything.code).toBe(2);
      expect(oneLine(everything.stderr)).toMatch(/needs at least one filter/);
    });

    it('show tells a prefetched job from a running one and prints its log and its steps; delete of a running job is a cancel request', async () => {
      const [first, second] = await enqueue([
        { type: 'report', priority: 1 },
        { type: 'report', priority: 0 },
      ]);
      const [running, prefetched] = await store.acquire({
        owner: 'worker-9',
        limit: 2,
        leaseMs: 60_000,
        types: ['report'],
        queues: null,
        tenants: null,
        start: 1,
      });
      expect([running?.id, prefetched?.id]).toEqual([first!.id, second!.id]);
      const lines = [
        { at: Date.UTC(2026, 10, 27, 9, 30), message: 'fetched 3 rows' },
        { at: Date.UTC(2026, 10, 27, 9, 31), message: 'warn: slow upstream' },
      ];
      await store.renewLeases('worker-9', 60_000, [
        { id: running!.id, token: running!.lockToken as string, logsJson: JSON.stringify(lines) },
      ]);
      const steps = [
        {
          name: 'charge',
          result: { id: 'ch_1' },
          at: Date.UTC(2026, 10, 27, 9, 32),
          durationMs: 12,
        },
        { name: 'mail', result: null, at: Date.UTC(2026, 10, 27, 9, 33), durationMs: 1500 },
      ];
      expect(
        await store.steps?.save(
          { id: running!.id, token: running!.lockToken as string },
          JSON.stringify(steps),
        ),
      ).toBe(true);
      const shown = await ok(['show', running!.id, ...db]);
      expect(shown).toMatch(/^\s+started\s+\d{4}-/m);
      expect(shown).toMatch(
        /Steps \(2\):\n {2}2026-11-27 09:32:00Z {2}charge {2}.+? {2}\{"id":"ch_1"\}\n {2}2026-11-27 09:33:00Z {2}mail {4}.+? {2}null\n/,
      );
      expect(shown).toContain('Log (2 lines):\n  2026-11-27 09:30:00Z  fetched 3 rows');
      expect(shown).toContain('warn: slow upstream');
      expect(await ok(['show', prefetched!.id, ...db])).toMatch(
        /^\s+started\s+not yet \(acquired, waiting in its owner’s prefetch\)$/m,
      );
      expect(await ok(['delete', running!.id, ...db])).toBe(
        `job ${running!.id} is running: cancel requested — it is removed (outcome cancelled) when its worker stops it
`,
      );
      expect(await store.getJob(running!.id)).toMatchObject({
        state: 'running',
        cancelRequested: true,
      });
    });

    it('signal, run through sh -c, resumes a job waiting in ctx.waitFor with its payload; show says what a parked job waits for', async () => {
      let resume: (approval: unknown) => void = () => {};
      const resumed = new Promise<unknown>((resolve) => {
        resume = resolve;
      });
      const engineStore = await b.openStore();
      const engine = new JobEngine({
        store: engineStore,
        logger: silentLogger,
        pollIntervalMs: 50,
        handlers: {
          'await-approval': async (job, ctx) => {
            const { order } = job.payload as { order: string };
            const approval = await ctx.waitFor('approval', { key: order, timeoutMs: 3_600_000 });
            resume(approval);
            return approval;
          },
          'cool-off': async (_job, ctx) => ctx.sleep('cool-off', 3_600_000),
        },
      });
      /** Job `id` once its handler parked it (a timer with its wait's checkpoint). */
      const parked = async (id: string): Promise<void> => {
        for (;;) {
          const job = await store.getJob(id);
          if (job?.state === 'timer' && job.steps && job.steps.length > 0) return;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };
      try {
        await engine.start();
        const waiting = await engine.enqueue('await-approval', { order: 'o-1' });
        const sleeping = await engine.enqueue('cool-off', {});
        await parked(waiting.id);
        await parked(sleeping.id);
        expect(await ok(['show', sleeping.id, ...db])).toMatch(
          /^ {2}waiting +sleeps until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in [^)]+\) \(ctx\.sleep "cool-off"\)$/m,
        );
        expect(await ok(['show', waiting.id, ...db])).toMatch(
          /^ {2}waiting +for signal approval until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in [^)]+\) \(ctx\.waitFor "approval"; send it with jobsctl signal approval --key o-1\)$/m,
        );
        // A signal for another key wakes nobody.
        expect(await json(['signal', 'approval', '--key', 'o-2', '--payload', '7', ...db])).toEqual(
          { name: 'approval', key: 'o-2', payloadBytes: 1 },
        );
        const command = [
          process.execPath,
          BIN,
          'signal',
          'approval',
          '--key',
          'o-1',
          '--payload',
          '{"ok": true, "by": "ops"}',
          ...db,
        ]
          .map(shellQuote)
          .join(' ');
        const sent = await run('sh', ['-c', command]);
        expect(sent).toEqual({
          code: 0,
          stdout:
            'sent signal approval (key o-1, 22 bytes of JSON): a job waiting for it is due now; if none waits yet, the first to wait takes it\n',
          stderr: '',
        });
        expect(await resumed).toEqual({ ok: true, by: 'ops' });
        expect(await ok(['show', waiting.id, ...db])).not.toMatch(/^ {2}waiting /m);
      } finally {
        await engine.stop();
        await engineStore.close();
      }
    });

    if (full) {
      it('signal refuses a bad name or an oversized payload with exit code 2, naming the argument', async () => {
        const cases: [string[], string][] = [
          [
            ['signal', '', '--key', 'o-1'],
            "jobsctl: error: <name>: engine.signal: a signal's name is a string of 1 to 255 characters without control characters",
          ],
          [
            ['signal', 'approval', '--key', 'o-1', '--payload', JSON.stringify('x'.repeat(70_000))],
            'jobsctl: error: --payload: engine.signal: the payload is 70002 bytes of JSON, more than the limit of 65536',
          ],
        ];
        for (const [args, message] of cases) {
          const result = await jobs([...args, ...db]);
          expect(result.code, args[1]).toBe(2);
          expect(oneLine(result.stderr)).toBe(message);
          expect(result.stdout).toBe('');
        }
      });
    }

    it('suspend parks the waiting jobs matching filters and activate brings them back', async () => {
      const [timer, due, other] = await enqueue([
        { type: 'sync', tenantId: 'acme', delayMs: 3_600_000 },
        { type: 'sync', tenantId: 'acme' },
        { type: 'sync', tenantId: 'other' },
      ]);
      expect(await json(['suspend', '--tenant', 'acme', ...db])).toEqual({ suspended: 2 });
      expect(await ids(['--state', 'suspended'])).toEqual([timer!.id, due!.id]);
      expect(await ok(['activate', '--tenant', 'acme', ...db])).toBe(
        'activated 2 jobs (tenantId=acme)\n',
      );
      expect((await store.getJob(timer!.id))?.state).toBe('timer');
      expect((await store.getJob(due!.id))?.state).toBe('async');
      expect((await store.getJob(other!.id))?.state).toBe('async');
      const unfiltered = await jobs(['suspend', ...db]);
      expect(unfiltered.code).toBe(2);
      oneLine(unfiltered.stderr);
    });

    it('schedules lists trigger, next fire time in the time zone, fired, skipped and paused; pause and resume by name', async () => {
      const client = new JobEngine({ store, logger: silentLogger });
      await client.schedule('nightly', {
        cron: '0 3 * * *',
        timezone: 'Europe/Berlin',
        type: 'report',
      });
      await client.schedule('ping', { every: 'PT10M' });
      const list = await json<Record<string, unknown>[]>(['schedules', ...db]);
      expect(list.map((s) => s.name).sort()).toEqual(['nightly', 'ping']);
      const nightly = list.find((s) => s.name === 'nightly')!;
      expect(nightly).toMatchObject({
        type: 'report',
        trigger: { cron: '0 3 * * *', every: null, repeat: null, timezone: 'Europe/Berlin' },
        paused: false,
        fired: 0,
        skipped: 0,
      });
      expect(nightly.nextAtLocal).toMatch(/^\d{4}-\d\d-\d\d 03:00:00 GMT\+[12]$/);
      expect(list.find((s) => s.name === 'ping')).toMatchObject({ trigger: { every: 'PT10M' } });

      const text = await ok(['schedules', ...db]);
      expect(text).toMatch(
        /^nightly\s+report\s+cron 0 3 \* \* \*\s+\d{4}-\d\d-\d\d 03:00:00 GMT\+[12]\s+0\s+0\s+active$/m,
      );
      expect(text).toMatch(/^ping\s+ping\s+every PT10M\s+/m);

      expect(await json(['schedules', 'pause', 'nightly', ...db])).toMatchObject({ paused: true });
      expect(await ok(['schedules', ...db])).toMatch(/^nightly\s.*\spaused$/m);
      expect(await ok(['schedules', 'resume', 'nightly', ...db])).toBe(
        'resumed schedule nightly\n',
      );
      expect((await store.getSchedule('nightly'))?.paused).toBe(false);
      const unknown = await jobs(['schedules', 'pause', 'nope', ...db]);
      expect(unknown.code).toBe(1);
      expect(oneLine(unknown.stderr)).toMatch(/schedule "nope" does not exist/);
    });

    it('tail prints jobs as an engine starts, finishes, fails and deadletters them, until stopped', async () => {
      const tailJson = new RunningCli(['tail', ...db, '--interval', '100', '--json']);
      const tailText = new RunningCli(['tail', ...db, '--interval', '100']);
      const events = (): Record<string, unknown>[] =>
        tailJson.lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
      const waitForEvent = (event: string, id?: string) =>
        tailJson.waitForLine(
          (line) => {
            const parsed = JSON.parse(line) as { event: string; job?: { id: string } };
            return parsed.event === event && (id === undefined || parsed.job?.id === id);
          },
          `a ${event} event${id === undefined ? '' : ` for job ${id}`}`,
        );
      const waitForText = (text: string) =>
        tailText.waitForLine((line) => line.includes(text), JSON.stringify(text));
      await waitForEvent('watching');
      await waitForText(' watching ');

      // Each handler waits until tail has seen its job running, so no poll can miss it.
      const gates = new Map<string, () => void>();
      const gate = (id: string) => new Promise<void>((resolve) => gates.set(id, resolve));
      /** Lets job `id`'s handler go on, once it runs (tail may see it leased a moment before). */
      const openGate = async (id: string): Promise<void> => {
        while (!gates.has(id)) await new Promise((resolve) => setTimeout(resolve, 10));
        gates.get(id)!();
      };
      const engineStore = await b.openStore();
      const engine = new JobEngine({
        store: engineStore,
        logger: silentLogger,
        pollIntervalMs: 50,
        handlers: {
          'tail-ok': async (job) => gate(job.id),
          'tail-flaky': {
            handler: async (job) => {
              await gate(job.id);
              throw new Error('flaky failure');
            },
            retry: { kind: 'fixed', delayMs: 3_600_000 },
          },
          'tail-doomed': async (job) => {
            await gate(job.id);
            throw new UnrecoverableError('doomed for good');
          },
        },
      });
      try {
        await engine.start();
        const made = await Promise.all(
          ['tail-ok', 'tail-flaky', 'tail-doomed'].map((type) => engine.enqueue(type, {})),
        );
        for (const job of made) {
          await waitForEvent('started', job.id);
          await waitForText(` started       job ${job.id} ${job.type} `);
          await openGate(job.id);
        }
        const [done, flaky, doomed] = made;
        await waitForEvent('finished', done!.id);
        await waitForEvent('failed', flaky!.id);
        await waitForEvent('deadlettered', doomed!.id);
        await waitForText(` finished      job ${done!.id} tail-ok `);
        await waitForText(
          ` failed        job ${flaky!.id} tail-flaky (queue default) attempt 1: flaky failure; retry in 59m`,
        );
        await waitForText(` deadlettered  job ${doomed!.id} tail-doomed `);
        // With history the outcome is known; without, a finished job is simply gone.
        const finished = events().find((e) => e.event === 'finished');
        expect([null, 'completed']).toContain(finished?.outcome);
        expect(events().find((e) => e.event === 'failed')).toMatchObject({
          job: { id: flaky!.id, type: 'tail-flaky', attempt: 1 },
          error: 'flaky failure',
        });
        expect(events().find((e) => e.event === 'deadlettered')).toMatchObject({
          job: { id: doomed!.id, type: 'tail-doomed' },
          error: 'doomed for good',
        });
        expect(events().find((e) => e.event === 'started')).toMatchObject({
          job: { owner: engine.snapshot().owner },
        });
      } finally {
        expect(await tailJson.stop()).toBe(0);
        expect(await tailText.stop()).toBe(0);
        await engine.stop();
        await engineStore.close();
      }
      expect(tailJson.stderr).toBe('');
    });

    it('history lists the jobs an engine finished, newest first, filtered by outcome and type, paged by cursor', async () => {
      const engineStore = await b.openStore();
      const engine = new JobEngine({
        store: engineStore,
        logger: silentLogger,
        pollIntervalMs: 50,
        history: { keep: 'all', retention: 'P1D' },
        handlers: {
          'history-ok': async (job) => ({ echoed: job.payload }),
          'history-doomed': async () => {
            throw new UnrecoverableError('doomed for good');
          },
        },
      });
      // Other tests' engines leave history too: every read here names its types.
      const settled = async (): Promise<boolean> =>
        (await engine.admin.listHistory({ type: 'history-ok' })).records.length === 2 &&
        (await store.listJobs({ type: 'history-doomed', state: 'deadletter', limit: 1, offset: 0 }))
          .length === 1;
      let made: Job[];
      try {
        await engine.start();
        made = await Promise.all([
          engine.enqueue('history-ok', { n: 1 }),
          engine.enqueue('history-ok', { n: 2 }),
          engine.enqueue('history-doomed', {}),
        ]);
        while (!(await settled())) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      } finally {
        await engine.stop();
        await engineStore.close();
      }
      interface Page {
        records: (Job & { outcome: string; result: unknown; finishedAt: string })[];
        nextCursor: string | null;
      }
      const [ok1, ok2, doomed] = made;
      // A dead-letter job enters history when an operator deletes it from the dead-letter area.
      expect(await json<Page>(['history', ...db, '--type', 'history-doomed'])).toEqual({
        records: [],
        nextCursor: null,
      });
      expect(await ok(['delete', doomed!.id, ...db])).toBe(`deleted job ${doomed!.id}\n`);

      const completed = await json<Page>(['history', ...db, '--type', 'history-ok']);
      expect(completed.records.map((r) => r.id).sort()).toEqual([ok1!.id, ok2!.id].sort());
      expect(completed.nextCursor).toBeNull();
      for (const record of completed.records) {
        expect(record).toMatchObject({ state: 'finished', outcome: 'completed', attempts: 1 });
        expect(record.result).toEqual({ echoed: record.payload });
        expect(new Date(record.finishedAt).toISOString()).toBe(record.finishedAt);
      }
      const dead = await json<Page>([
        'history',
        ...db,
        '--outcome',
        'deadletter',
        '--type',
        'history-doomed',
      ]);
      expect(dead.records).toMatchObject([
        { id: doomed!.id, outcome: 'deadletter', lastError: { message: 'doomed for good' } },
      ]);
      expect(
        (await json<Page>(['history', ...db, '--outcome', 'cancelled', '--type', 'history-ok']))
          .records,
      ).toEqual([]);

      // One record a page: the cursor of each page leads to the next, until none is left.
      const first = await json<Page>(['history', ...db, '--type', 'history-ok', '--limit', '1']);
      expect(first.records).toHaveLength(1);
      expect(first.nextCursor).not.toBeNull();
      const second = await json<Page>([
        'history',
        ...db,
        '--type',
        'history-ok',
        '--limit',
        '1',
        '--cursor',
        first.nextCursor!,
      ]);
      expect([...first.records, ...second.records].map((r) => r.id)).toEqual(
        completed.records.map((r) => r.id),
      );

      const text = await ok(['history', ...db, '--type', 'history-ok', '--limit', '1']);
      expect(text).toMatch(
        /^\s*ID\s+TYPE\s+OUTCOME\s+FINISHED\s+DURATION\s+ATTEMPTS\s+LAST ERROR$/m,
      );
      expect(text).toMatch(
        new RegExp(
          `^\\s*${completed.records[0]!.id}\\s+history-ok\\s+completed\\s+(now|.+ ago)\\s+\\S+\\s+1\\s+-$`,
          'm',
        ),
      );
      expect(text).toContain(`1 finished job; next page: --cursor ${first.nextCursor}`);
      const deadText = await ok([
        'history',
        ...db,
        '--type',
        'history-doomed',
        '--outcome',
        'deadletter',
      ]);
      expect(deadText).toMatch(
        new RegExp(`^\\s*${doomed!.id}\\s+history-doomed\\s+deadletter\\s.*doomed for good$`, 'm'),
      );
      expect(deadText).toMatch(/^1 finished job$/m);
      expect(await ok(['history', ...db, '--type', 'nothing'])).toMatch(/^no finished jobs match/);
      if (full) {
        for (const args of [
          ['--outcome', 'done'],
          ['--since', 'yesterday'],
          ['--limit', '0'],
        ]) {
          const result = await jobs(['history', ...db, ...args]);
          expect(result.code, args.join(' ')).toBe(2);
          oneLine(result.stderr);
        }
        const later = new Date(Date.parse(completed.records[0]!.finishedAt) + 3_600_000);
        const okIds = async (bound: '--since' | '--until') =>
          (
            await json<Page>(['history', ...db, '--type', 'history-ok', bound, later.toISOString()])
          ).records.map((r) => r.id);
        expect(await okIds('--since')).toEqual([]);
        expect(await okIds('--until')).toEqual(completed.records.map((r) => r.id));
      }
    });

    it('a database without the schema gets one line saying to run jobsctl migrate', async () => {
      let args: string[];
      if (b.name === 'postgres') args = [...db.slice(0, 2), '--schema', 'cli_never_migrated'];
      else if (b.name === 'mysql') args = [...db, '--table-prefix', 'never_'];
      else {
        const empty = join(dirname(db[1]!), 'empty.db');
        const missing = await jobs(['status', '--db', empty]);
        expect(missing.code).toBe(1);
        expect(oneLine(missing.stderr)).toBe(
          `jobsctl: error: no SQLite database at ${empty}: run \`jobsctl migrate --db ${empty}\` to create it`,
        );
        writeFileSync(empty, '');
        args = ['--db', empty];
      }
      const result = await jobs(['status', ...args]);
      expect(result.code).toBe(1);
      expect(oneLine(result.stderr)).toMatch(
        new RegExp(
          `has no @jobs tables .*: run \`jobsctl migrate ${args.join(' ').replace(/[.*?]/g, '\\$&')}\` first$`,
        ),
      );
    });

    it.skipIf(b?.unreachableArgs === null)(
      'an unreachable server gets one line naming host and port and what to check',
      async () => {
        const result = await jobs(['status', ...(b.unreachableArgs as string[])]);
        expect(result.code).toBe(1);
        expect(oneLine(result.stderr)).toMatch(
          /^jobsctl: error: cannot reach (PostgreSQL|MySQL\/MariaDB) at 127\.0\.0\.1:1 \(connection refused\): check that the server is running/,
        );
      },
    );
  });
}
