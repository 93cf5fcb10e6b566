import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeNewJob } from '@jobs/conformance';
import { FakeClock, StoreError } from '@jobs/core';
import { afterEach, describe, expect, it } from 'vitest';
import { JsonFileJobStore } from '../src/json-file-store.js';

const dirs: string[] = [];
const opened: JsonFileJobStore[] = [];

function freshFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-json-durability-'));
  dirs.push(dir);
  return join(dir, 'jobs.json');
}

async function openStore(filename: string, clock?: FakeClock): Promise<JsonFileJobStore> {
  const store = new JsonFileJobStore(clock ? { filename, clock } : { filename });
  opened.push(store);
  await store.migrate();
  return store;
}

afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('JsonFileJobStore durability', () => {
  it('jobs, their states and schedules survive close and reopen, and ids are never reused', async () => {
    const filename = freshFile();
    const clock = new FakeClock();
    const first = await openStore(filename, clock);
    const [a, b, c] = await first.enqueue([
      makeNewJob({ payload: { to: 'ada' }, key: 'welcome-ada' }),
      makeNewJob({ delayMs: 60_000 }),
      makeNewJob(),
    ]);
    const [held] = await first.acquire({
      owner: 'o',
      limit: 1,
      leaseMs: 1_000,
      types: ['work'],
      queues: null,
      tenants: null,
    });
    expect(held?.id).toBe(a?.job.id);
    await first.fail([
      {
        id: held!.id,
        token: held!.lockToken!,
        error: { message: 'boom', stack: null },
        deadletter: true,
        retryDelayMs: 0,
      },
    ]);
    await first.deleteJob(c!.job.id);
    await first.saveSchedule({
      name: 'nightly',
      spec: { cron: '0 3 * * *' },
      nextAt: new Date(clock.now() + 5_000),
      resetProgress: false,
    });
    await first.close();

    const second = await openStore(filename, clock);
    expect(await second.getJob(a!.job.id)).toMatchObject({
      state: 'deadletter',
      payload: { to: 'ada' },
      key: 'welcome-ada',
      lastError: { message: 'boom', stack: null },
    });
    expect(await second.getJob(b!.job.id)).toMatchObject({
      state: 'timer',
      dueAt: new Date(clock.now() + 60_000),
    });
    expect(await second.getJob(c!.job.id)).toBeNull();
    expect(await second.getSchedule('nightly')).toMatchObject({
      spec: { cron: '0 3 * * *' },
      version: 1,
    });
    // The unique key is still held after the reopen, and the next id follows the deleted one.
    const [again, next] = await second.enqueue([makeNewJob({ key: 'welcome-ada' }), makeNewJob()]);
    expect(again).toMatchObject({ created: false, job: { id: a!.job.id } });
    expect(Number(next!.job.id)).toBe(Number(c!.job.id) + 1);
  });

  it('a job is read back as the same Job after a reopen: its times (as Dates), start mark, progress, log and time limit', async () => {
    const filename = freshFile();
    const clock = new FakeClock();
    const first = await openStore(filename, clock);
    const occurrence = new Date(clock.now() - 1_000);
    await first.enqueue([
      makeNewJob({
        payload: { when: '2030-01-01T00:00:00.000Z', n: [1, 2] },
        occurrence,
        schedule: 'nightly',
        shard: { index: 1, count: 2 },
        meta: { traceparent: 'x' },
        retryPolicy: { kind: 'fixed', delayMs: 5 },
        timeoutMs: 2_500,
      }),
    ]);
    const [held] = await first.acquire({
      owner: 'o',
      limit: 1,
      leaseMs: 60_000,
      types: ['work'],
      queues: null,
      tenants: null,
      start: 0,
    });
    expect(held?.startedAt).toBeNull();
    clock.advance(7);
    await first.renewLeases('o', 60_000, [
      {
        id: held!.id,
        token: held!.lockToken!,
        start: true,
        progressJson: JSON.stringify({ done: 3 }),
        logsJson: JSON.stringify([{ at: clock.now(), message: 'step 1' }]),
      },
    ]);
    const before = await first.getJob(held!.id);
    await first.close();

    const second = await openStore(filename, clock);
    const after = await second.getJob(held!.id);
    expect(after).toEqual(before);
    expect(after).toMatchObject({
      state: 'running',
      // A string in the payload that looks like a time stays a string: only Job's own times
      // are revived.
      payload: { when: '2030-01-01T00:00:00.000Z', n: [1, 2] },
      occurrence,
      startedAt: new Date(clock.now()),
      progress: { done: 3 },
      logs: [{ at: new Date(clock.now()), message: 'step 1' }],
      timeoutMs: 2_500,
    });
    expect(after!.lockExpiresAt).toBeInstanceOf(Date);
    expect(after!.createdAt).toBeInstanceOf(Date);
  });

  it('a file of the earlier row layout (format 1) is refused, naming the format, instead of misread', async () => {
    const filename = freshFile();
    writeFileSync(filename, JSON.stringify({ format: 1, nextId: 1, jobs: [], schedules: [] }));
    const store = new JsonFileJobStore({ filename });
    opened.push(store);
    await expect(store.migrate()).rejects.toThrow(/has format 1; this store reads format 2/);
  });

  it('a temp file left by a crash mid-write is ignored and removed; the last complete write wins', async () => {
    const filename = freshFile();
    const first = await openStore(filename);
    const [job] = await first.enqueue([makeNewJob({ payload: { kept: true } })]);
    await first.close();
    // What a crash between "write temp file" and "rename" leaves: a torn, unparseable temp file.
    const stray = `${filename}.0badc0de.tmp`;
    writeFileSync(stray, '{"format":1,"nextId":9,"jobs":[{"id":1,"type":"wo');

    const second = await openStore(filename);
    expect(await second.getJob(job!.job.id)).toMatchObject({
      payload: { kept: true },
      state: 'async',
    });
    expect(existsSync(stray)).toBe(false);
    const [next] = await second.enqueue([makeNewJob()]);
    expect(Number(next!.job.id)).toBe(Number(job!.job.id) + 1);
  });

  it('processes killed (SIGKILL) at random points while writing leave whole files with every acknowledged job', async () => {
    // Several writers at once, each killed at a random moment of its write cycle; a store that
    // overwrote its file in place would leave a torn file in some of them.
    const rounds = await Promise.all(
      [0, 1, 2, 3].map(async () => {
        const filename = freshFile();
        return { filename, acknowledged: await runAndKill(filename, 30, Math.random() * 8) };
      }),
    );
    for (const { filename, acknowledged } of rounds) {
      const store = await openStore(filename);
      const jobs = await store.listJobs({ limit: 1000, offset: 0 });
      const ids = new Set(jobs.map((j) => j.id));
      for (const id of acknowledged) expect(ids.has(id), `acknowledged job ${id}`).toBe(true);
      // Ids are dense: the file is one consistent snapshot, not a mix of two writes.
      expect(jobs.map((j) => Number(j.id))).toEqual(jobs.map((_, i) => i + 1));
      expect(readdirSync(dirname(filename)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    }
  });

  it('a write that fails is rolled back in memory and reported as a StoreError', async () => {
    const filename = freshFile();
    const store = await openStore(filename);
    const [kept] = await store.enqueue([makeNewJob()]);
    // Removing the directory makes the next write fail when it creates its temp file.
    rmSync(join(filename, '..'), { recursive: true, force: true });
    await expect(store.enqueue([makeNewJob({ payload: 'lost' })])).rejects.toBeInstanceOf(
      StoreError,
    );
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([
      await store.getJob(kept!.job.id),
    ]);

    mkdirSync(join(filename, '..'));
    const [next] = await store.enqueue([makeNewJob({ payload: 'written' })]);
    expect(Number(next!.job.id)).toBe(Number(kept!.job.id) + 1);
    expect(existsSync(filename)).toBe(true);
  });

  it('an operation that throws halfway leaves nothing behind, while the calls around it commit', async () => {
    const filename = freshFile();
    const store = await openStore(filename);
    // Issued together, so they run in one batch; the middle call fails on its second job (a
    // BigInt cannot be written as JSON) after its first job was already inserted in memory.
    const [before, broken, after] = await Promise.allSettled([
      store.enqueue([makeNewJob({ payload: 'before' })]),
      store.enqueue([makeNewJob({ payload: 'half' }), makeNewJob({ payload: { n: 1n } })]),
      store.enqueue([makeNewJob({ payload: 'after' })]),
    ]);
    expect([before.status, broken.status, after.status]).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    const listed = async (s: JsonFileJobStore) =>
      (await s.listJobs({ limit: 10, offset: 0 })).map((j) => [j.id, j.payload]);
    expect(await listed(store)).toEqual([
      ['1', 'before'],
      ['2', 'after'],
    ]);
    await store.close();
    expect(await listed(await openStore(filename))).toEqual([
      ['1', 'before'],
      ['2', 'after'],
    ]);
  });

  it('a caller awaiting one call after another does not starve timers (an engine heartbeat)', async () => {
    const store = await openStore(freshFile());
    let ticks = 0;
    const heartbeat = setInterval(() => {
      ticks += 1;
    }, 1);
    try {
      for (let n = 0; n < 50; n++) await store.enqueue([makeNewJob()]);
    } finally {
      clearInterval(heartbeat);
    }
    // Fifty fsynced writes take many milliseconds; the interval must have had its turns.
    expect(ticks).toBeGreaterThan(0);
  });

  it('a file that is not valid JSON makes migrate() fail loudly instead of starting empty', async () => {
    const filename = freshFile();
    writeFileSync(filename, '{"format":1,"nextId":');
    const store = new JsonFileJobStore({ filename });
    opened.push(store);
    await expect(store.migrate()).rejects.toThrow(/is not valid JSON/);
  });
});

/**
 * Runs `crash-writer.ts` on `filename`, kills it with SIGKILL `delayMs` after it
 * acknowledged `acks` jobs, and returns every id it acknowledged (written to disk, by its word).
 */
async function runAndKill(filename: string, acks: number, delayMs: number): Promise<string[]> {
  const writer = fileURLToPath(new URL('./crash-writer.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', writer, filename, JSON.stringify(makeNewJob())],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const acknowledged: string[] = [];
  let buffered = '';
  let stderr = '';
  let killing = false;
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.on('data', (chunk: Buffer) => {
    const lines = (buffered + chunk.toString()).split('\n');
    buffered = lines.pop() ?? '';
    acknowledged.push(...lines);
    if (!killing && acknowledged.length >= acks) {
      killing = true;
      setTimeout(() => child.kill('SIGKILL'), delayMs);
    }
  });
  const signal = await new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('close', (_code, sig) => resolve(sig)),
  );
  if (signal !== 'SIGKILL') throw new Error(`crash-writer exited on its own: ${stderr}`);
  return acknowledged;
}
