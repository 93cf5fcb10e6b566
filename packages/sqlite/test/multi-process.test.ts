import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sqliteDialect } from '@jobs/core/sql';
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { freshFile, newJob, openStore, peerOf, sleep } from './helpers.js';

const fixture = (name: string): string =>
  fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** Forks a TypeScript fixture under tsx; stderr is kept for the failure message. */
function spawnFixture(name: string, args: string[]): ChildProcess & { stderrText: () => string } {
  const child = fork(fixture(name), args, {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += String(chunk);
  });
  return Object.assign(child, { stderrText: () => stderr });
}

function nextMessage<T>(child: ChildProcess & { stderrText: () => string }): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`child exited (${code}) before answering: ${child.stderrText()}`));
    child.once('exit', onExit);
    child.once('message', (message) => {
      child.off('exit', onExit);
      resolve(message as T);
    });
  });
}

function exited(child: ChildProcess & { stderrText: () => string }): Promise<void> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) {
      if (child.exitCode === 0) resolve();
      else reject(new Error(`child failed (${child.exitCode}): ${child.stderrText()}`));
      return;
    }
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`child failed (${code}): ${child.stderrText()}`)),
    );
  });
}

describe('several processes on one database file', () => {
  test('concurrent migrate() from 4 processes applies each migration once', async () => {
    const filename = freshFile();
    const children = Array.from({ length: 4 }, () => spawnFixture('migrate-worker.ts', [filename]));
    await Promise.all(children.map(exited));
    const db = new Database(filename, { readonly: true });
    try {
      const versions = db
        .prepare('SELECT version FROM jobs_jobs_migrations ORDER BY version')
        .pluck()
        .all();
      expect(versions).toEqual(
        sqliteDialect({ tablePrefix: 'jobs_' }).migrations.map((m) => m.version),
      );
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      db.close();
    }
  });

  test('3 processes racing acquire+complete hold every job exactly once and never two of one scope', async () => {
    const store = await openStore();
    const filename = store.db.name;
    store.db.exec(
      'CREATE TABLE race_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT, event TEXT, job_id TEXT, scope TEXT)',
    );
    const total = 600;
    const jobs = Array.from({ length: total }, (_, i) =>
      i % 3 === 0
        ? newJob({ payload: i, scope: `s${i % 4}`, exclusive: true })
        : newJob({ payload: i, priority: i % 5 }),
    );
    const enqueued = await store.enqueue(jobs);
    const children = ['p1', 'p2', 'p3'].map((owner) =>
      spawnFixture('acquire-worker.ts', [filename, owner]),
    );
    await Promise.all(children.map((c) => nextMessage<string>(c)));
    const results = children.map((c) =>
      nextMessage<{ held: string[]; counters: { statements: number } }>(c),
    );
    for (const child of children) child.send('go');
    const done = await Promise.all(results);
    await Promise.all(children.map(exited));

    const held = done.flatMap((d) => d.held);
    expect(held.length).toBe(total);
    expect(new Set(held).size).toBe(total);
    expect(new Set(held)).toEqual(new Set(enqueued.map((r) => r.job.id)));
    // every process did real work: the race was a race
    expect(done.filter((d) => d.held.length > 0).length).toBeGreaterThan(1);

    const log = store.db
      .prepare('SELECT event, job_id, scope FROM race_log WHERE scope IS NOT NULL ORDER BY seq')
      .all() as { event: string; job_id: string; scope: string }[];
    const holder = new Map<string, string>();
    for (const entry of log) {
      if (entry.event === 'start') {
        expect(holder.get(entry.scope), `scope ${entry.scope} held twice`).toBeUndefined();
        holder.set(entry.scope, entry.job_id);
      } else {
        holder.delete(entry.scope);
      }
    }
    expect(log.length).toBe(2 * (total / 3));
  });

  test('3 processes with real engines run every job exactly once, also jobs enqueued while they run', async () => {
    const store = await openStore();
    const filename = store.db.name;
    store.db.exec('CREATE TABLE runs (job_id INTEGER NOT NULL, owner TEXT NOT NULL)');
    const upFront = 300;
    const trickled = 100;
    await store.enqueue(Array.from({ length: upFront }, (_, i) => newJob({ payload: i })));

    const children = ['e1', 'e2', 'e3'].map((owner) =>
      spawnFixture('engine-worker.ts', [filename, owner]),
    );
    try {
      await Promise.all(children.map((c) => nextMessage<string>(c)));
      for (let i = 0; i < trickled; i += 10) {
        await store.enqueue(
          Array.from({ length: 10 }, (_, j) => newJob({ payload: upFront + i + j })),
        );
        await sleep(5);
      }
      const total = upFront + trickled;
      const count = store.db.prepare('SELECT COUNT(*) FROM runs').pluck();
      const left = store.db.prepare('SELECT COUNT(*) FROM jobs_jobs').pluck();
      const deadline = Date.now() + 30_000;
      while ((Number(count.get()) < total || Number(left.get()) > 0) && Date.now() < deadline) {
        await sleep(20);
      }
      expect(Number(left.get())).toBe(0);
      const runs = store.db
        .prepare('SELECT job_id, COUNT(*) AS n FROM runs GROUP BY job_id HAVING n > 1')
        .all();
      expect(runs).toEqual([]);
      expect(Number(count.get())).toBe(total);
      const owners = store.db.prepare('SELECT DISTINCT owner FROM runs').pluck().all();
      expect(owners.length).toBeGreaterThan(1);
    } finally {
      for (const child of children) if (child.exitCode === null) child.send('stop');
      await Promise.all(children.map(exited));
    }
  });

  test('jobs whose enqueue resolved survive a SIGKILL of the process; its leases expire and are recovered', async () => {
    const store = await openStore();
    const child = spawnFixture('crash-worker.ts', [store.db.name]);
    const enqueued: string[] = [];
    const held = await new Promise<string[]>((resolve, reject) => {
      child.on('message', (message: { enqueued?: string; held?: string[] }) => {
        if (message.enqueued) enqueued.push(message.enqueued);
        if (message.held) resolve(message.held);
      });
      child.once('exit', (code) =>
        reject(new Error(`child exited ${code}: ${child.stderrText()}`)),
      );
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    // a new connection after the crash sees every enqueued job (WAL + synchronous=NORMAL)
    const after = peerOf(store.db.name);
    const jobs = await after.listJobs({ limit: 1000, offset: 0 });
    expect(jobs.map((j) => j.id).sort()).toEqual([...enqueued].sort());
    expect(
      jobs
        .filter((j) => j.state === 'running')
        .map((j) => j.id)
        .sort(),
    ).toEqual([...held].sort());

    // the dead owner's leases expire and the jobs become acquirable again, one attempt counted
    await sleep(350);
    const recovered = await after.recoverExpiredLeases(100);
    expect(recovered.requeued.sort()).toEqual([...held].sort());
    const again = await after.acquire({
      owner: 'survivor',
      limit: 100,
      leaseMs: 30_000,
      types: ['work'],
      queues: null,
      tenants: null,
    });
    expect(again.length).toBe(enqueued.length);
  });
});
