import { describe, expect, it } from 'vitest';
import { prunedRetention } from '../src/engine/acquisition-loop.js';
import {
  FakeClock,
  HISTORY_RESULT_MAX_BYTES,
  historyResultJson,
  JobEngine,
  type JobHistoryRecord,
  MemoryJobStore,
  UnrecoverableError,
  ValidationError,
} from '../src/index.js';
import { engine, newJob, waitFor } from './helpers.js';

describe('history options', () => {
  it('defaults to keeping all finished jobs for a week, and configures the store so', () => {
    const store = new MemoryJobStore();
    const settings: unknown[] = [];
    store.history.configure = (s) => void settings.push(s);
    new JobEngine({ store });
    expect(settings).toEqual([{ keep: 'all', retentionMs: 7 * 24 * 3_600_000 }]);
  });

  it('rejects an unknown keep, a bad or out-of-range retention, and unknown keys', () => {
    const store = new MemoryJobStore();
    const bad: unknown[] = [
      { keep: 'some' },
      { retention: '7 days' },
      { retention: 'PT0S' },
      { retention: 'PT30S' },
      { retention: 'P4000D' },
      { keepFor: 'P1D' },
      'all',
    ];
    for (const history of bad) {
      expect(
        () => new JobEngine({ store, history: history as never }),
        JSON.stringify(history),
      ).toThrow(ValidationError);
    }
    expect(
      () => new JobEngine({ store, history: { keep: 'failed', retention: 'PT1H' } }),
    ).not.toThrow();
  });
});

describe('history result', () => {
  it('keeps JSON results verbatim and null for undefined', () => {
    expect(historyResultJson({ a: [1, 'x'] })).toBe('{"a":[1,"x"]}');
    expect(historyResultJson(undefined)).toBeNull();
    expect(historyResultJson('text')).toBe('"text"');
  });

  it('replaces a result over 64 KiB, or one that is not storable JSON, by a marker', () => {
    const big = JSON.parse(historyResultJson('x'.repeat(HISTORY_RESULT_MAX_BYTES)) as string);
    expect(big).toEqual({
      $jobs: 'result-too-large',
      bytes: HISTORY_RESULT_MAX_BYTES + 2,
      limit: HISTORY_RESULT_MAX_BYTES,
    });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const value of [cyclic, 10n, 'a\u0000b', '\uD800', () => 1]) {
      expect(JSON.parse(historyResultJson(value) as string)).toMatchObject({
        $jobs: 'result-not-json',
      });
    }
    // What JSON would change silently is not stored as {} either: the marker names the path.
    expect(JSON.parse(historyResultJson({ byId: new Map([[1, 'a']]) }) as string)).toEqual({
      $jobs: 'result-not-json',
      reason: expect.stringMatching(/^result\.byId: is a Map/),
    });
    const holes: unknown[] = [1];
    holes[2] = 3;
    expect(JSON.parse(historyResultJson(holes) as string)).toMatchObject({
      reason: expect.stringMatching(/^result\.1: is a hole/),
    });
  });
});

describe('history through the engine', () => {
  it('records what the handler returned and how long it ran; admin.getJob finds it', async () => {
    const store = new MemoryJobStore();
    const e = engine({
      store,
      handlers: { work: async () => ({ ok: true }), big: async () => 'x'.repeat(70_000) },
    });
    await e.start();
    const job = await e.enqueue('work', { n: 1 });
    const big = await e.enqueue('big', {});
    await waitFor(async () => (await store.history.get(big.id)) !== null, 'big recorded');
    await waitFor(async () => (await store.history.get(job.id)) !== null, 'work recorded');
    const record = (await e.admin.getJob(job.id)) as JobHistoryRecord;
    expect(record).toMatchObject({
      id: job.id,
      state: 'finished',
      outcome: 'completed',
      result: { ok: true },
      payload: { n: 1 },
      lockOwner: e.owner,
    });
    expect(record.durationMs).toBeGreaterThanOrEqual(0);
    expect((await e.admin.getJob(big.id)) as JobHistoryRecord).toMatchObject({
      result: { $jobs: 'result-too-large' },
    });
  });

  it("keep 'failed' records no completions, keeps dead-letter jobs deleted by deleteMany", async () => {
    const store = new MemoryJobStore();
    const e = engine({
      store,
      history: { keep: 'failed' },
      handlers: {
        work: async () => 'done',
        bad: async () => {
          throw new UnrecoverableError('nope');
        },
      },
    });
    await e.start();
    const ok = await e.enqueue('work');
    const bad = await e.enqueue('bad');
    await waitFor(async () => (await store.getJob(bad.id))?.state === 'deadletter', 'dead');
    await waitFor(async () => (await store.getJob(ok.id)) === null, 'completed');
    expect(await e.admin.getJob(ok.id)).toBeNull();
    expect(await e.admin.deleteMany({ type: 'bad', dryRun: true })).toBe(1);
    expect(await e.admin.deleteMany({ type: 'bad' })).toBe(1);
    const page = await e.admin.listHistory();
    expect(page.records.map((r) => [r.id, r.outcome, r.lastError?.message])).toEqual([
      [bad.id, 'deadletter', 'nope'],
    ]);
    expect(page.nextCursor).toBeNull();
  });

  it('listHistory pages with cursors, newest first, and checks its options', async () => {
    const clock = new FakeClock();
    const store = new MemoryJobStore({ clock });
    const e = engine({ store, clock, handlers: { work: async (job) => job.payload } });
    await e.start();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const job = await e.enqueue('work', { i });
      ids.push(job.id);
      await waitFor(async () => (await store.history.get(job.id)) !== null, `job ${i}`);
      clock.advance(1000);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await e.admin.listHistory({ limit: 3, cursor });
      seen.push(...page.records.map((r) => r.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    await expect(e.admin.listHistory({ cursor: 'nonsense' })).rejects.toThrow(ValidationError);
    await expect(e.admin.listHistory({ outcome: 'done' as never })).rejects.toThrow(
      ValidationError,
    );
    await expect(e.admin.listHistory({ limit: 0 })).rejects.toThrow(ValidationError);
  });

  it('retryMany revives dead-letter jobs in batches and counts them; dryRun changes nothing', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    for (let i = 0; i < 3; i++) {
      const held = await store.enqueue([newJob({ type: 'mail', retries: 0 })]);
      const [job] = await store.acquire({
        owner: 'o',
        limit: 1,
        leaseMs: 1000,
        types: ['mail'],
        queues: null,
        tenants: null,
      });
      expect(job?.id).toBe(held[0]?.job.id);
      await store.fail([
        {
          id: job!.id,
          token: job!.lockToken!,
          error: { message: 'x', stack: null },
          deadletter: true,
          retryDelayMs: 0,
        },
      ]);
    }
    expect(await client.admin.retryMany({ type: 'mail', dryRun: true })).toBe(3);
    expect((await client.admin.stats()).byState.deadletter).toBe(3);
    expect(await client.admin.retryMany({ type: 'mail', retries: 2 })).toBe(3);
    expect((await client.admin.stats()).byState.async).toBe(3);
    await expect(client.admin.deleteMany({})).rejects.toThrow(ValidationError);
    await expect(client.admin.retryMany({ state: 'async' } as never)).rejects.toThrow(
      ValidationError,
    );
  });

  it('maintenance prunes records past the retention when the engine starts', async () => {
    const clock = new FakeClock();
    const store = new MemoryJobStore({ clock });
    store.history.configure({ keep: 'all', retentionMs: 3_600_000 });
    const job = (await store.enqueue([newJob()]))[0]!.job;
    const [held] = await store.acquire({
      owner: 'o',
      limit: 1,
      leaseMs: 1000,
      types: ['work'],
      queues: null,
      tenants: null,
    });
    await store.complete([{ id: held!.id, token: held!.lockToken!, resultJson: '1' }]);
    expect(await store.history.get(job.id)).not.toBeNull();
    clock.advance(2 * 3_600_000);
    const e = engine({
      store,
      clock,
      history: { retention: 'PT1H' },
      handlers: { work: async () => 1 },
    });
    const pruned = new Promise((resolve) => e.on('history-pruned', resolve));
    await e.start();
    expect(await pruned).toEqual({ count: 1 });
    expect(await store.history.get(job.id)).toBeNull();
  });

  it('with history in partitions, maintenance prunes up to the partition boundary before the retention', async () => {
    const DAY = 86_400_000;
    // 2026-11-29 10:00 UTC: two days' retention reaches back to the 27th, 10:00.
    const clock = new FakeClock(Date.UTC(2026, 10, 29, 10));
    const store = new MemoryJobStore({ clock });
    const asked: number[] = [];
    const prune = store.history.prune.bind(store.history);
    store.history.partitionMs = DAY;
    store.history.prune = (retentionMs, limit) => {
      asked.push(retentionMs);
      return prune(retentionMs, limit);
    };
    const e = engine({
      store,
      clock,
      history: { retention: 'P2D' },
      handlers: { work: async () => 1 },
    });
    await e.start();
    await waitFor(() => asked.length > 0, 'the first prune');
    await e.stop();
    // Back to the 27th, 00:00 UTC: the whole of that day's partition is kept, none of it pruned.
    expect(asked[0]).toBe(2 * DAY + 10 * 3_600_000);
    expect(prunedRetention(2 * DAY, DAY, Date.UTC(2026, 10, 29, 0))).toBe(2 * DAY);
    expect(prunedRetention(3_600_000, DAY, Date.UTC(2026, 10, 29, 10))).toBe(3_600_000);
    expect(prunedRetention(2 * DAY, undefined, Date.UTC(2026, 10, 29, 10))).toBe(2 * DAY);
  });
});
