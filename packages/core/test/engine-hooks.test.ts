/**
 * `meta` on enqueue (checked like every other input) and `engine.use` hooks around enqueue and
 * handler runs: order, what an enqueue hook may add, a run hook's async context reaching the
 * handler, and removal.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import {
  type Job,
  JobEngine,
  MAX_META_ENTRIES,
  MAX_META_VALUE,
  MemoryJobStore,
  ValidationError,
} from '../src/index.js';
import { engine, waitFor } from './helpers.js';

describe('enqueue option meta', () => {
  const client = new JobEngine({ store: new MemoryJobStore() });
  const tooMany = Object.fromEntries(
    Array.from({ length: MAX_META_ENTRIES + 1 }, (_, i) => [`k${i}`, 'v']),
  );
  const bad: Array<[string, unknown, string]> = [
    ['an array', ['traceparent'], 'meta'],
    ['a Map', new Map([['a', 'b']]), 'meta'],
    ['a number value', { attempt: 1 }, 'meta.attempt'],
    ['a null value', { a: null }, 'meta.a'],
    ['an over-long value', { a: 'x'.repeat(MAX_META_VALUE + 1) }, 'meta.a'],
    ['a newline in a value', { a: 'one\ntwo' }, 'meta.a'],
    ['an empty key', { '': 'x' }, 'meta key'],
    ['a NUL in a key', { 'a\u0000b': 'x' }, 'meta key'],
    ['an over-long key', { ['k'.repeat(256)]: 'x' }, 'meta key'],
    [`${MAX_META_ENTRIES + 1} entries`, tooMany, 'meta'],
  ];
  for (const [name, meta, field] of bad) {
    it(`rejects ${name} with a ValidationError naming ${field}, writing nothing`, async () => {
      const error = await client
        .enqueue('t', {}, { meta: meta as Record<string, string> })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe(field);
      expect((await client.admin.stats()).total).toBe(0);
    });
  }

  it('is stored as given; empty or absent meta is null', async () => {
    const meta = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', e: '' };
    const [given, empty, absent] = await client.enqueueMany([
      { type: 't', options: { meta } },
      { type: 't', options: { meta: {} } },
      { type: 't' },
    ]);
    expect(given?.meta).toEqual(meta);
    expect(given?.meta).not.toBe(meta);
    expect([empty?.meta, absent?.meta]).toEqual([null, null]);
    expect((await client.admin.getJob(given!.id))?.meta).toEqual(meta);
  });
});

describe('engine.use hooks', () => {
  it('enqueue hooks wrap the write in the order added and may add meta, which is checked', async () => {
    const client = new JobEngine({ store: new MemoryJobStore() });
    const calls: string[] = [];
    client.use({
      async enqueue(drafts, next) {
        calls.push(`outer ${drafts.map((d) => `${d.type}@${d.queue}`).join(',')}`);
        for (const draft of drafts) draft.meta.outer = 'yes';
        const jobs = await next();
        calls.push(`outer got ${jobs.length}`);
        return jobs;
      },
    });
    const removeInner = client.use({
      enqueue(drafts, next) {
        calls.push(`inner sees ${drafts[0]?.meta.outer}`);
        return next();
      },
    });
    const [job] = await client.enqueueMany([
      { type: 'a', options: { meta: { own: '1' } } },
      { type: 'b', options: { queue: 'q' } },
    ]);
    expect(calls).toEqual(['outer a@default,b@q', 'inner sees yes', 'outer got 2']);
    expect(job?.meta).toEqual({ own: '1', outer: 'yes' });

    removeInner();
    client.use({
      enqueue(drafts, next) {
        drafts[0]!.meta.bad = 'line\nbreak';
        return next();
      },
    });
    const error = await client.enqueue('c').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('meta.bad');
    expect((await client.admin.stats()).total).toBe(2);
  });

  it('a run hook wraps the handler: its async context reaches the handler, its result is the run’s', async () => {
    const store = new MemoryJobStore();
    const storage = new AsyncLocalStorage<string>();
    const seen: Array<string | undefined> = [];
    const outcomes: string[] = [];
    const e = engine({
      store,
      handlers: {
        work: async (job: Job) => {
          await Promise.resolve();
          seen.push(storage.getStore());
          if (job.payload === 'fail') throw new Error('handler failed');
        },
      },
    });
    const remove = e.use({
      run: (job, next) =>
        storage.run(`run ${job.id}`, next).then(
          (value) => {
            outcomes.push('ok');
            return value;
          },
          (error: Error) => {
            outcomes.push(error.message);
            throw error;
          },
        ),
    });
    let failed = 0;
    e.on('failed', () => {
      failed += 1;
    });
    await e.start();
    const ok = await e.enqueue('work', 'ok');
    const bad = await e.enqueue('work', 'fail', { retries: 0 });
    await waitFor(async () => failed === 1 && (await store.getJob(ok.id)) === null, 'both runs');
    expect(seen.sort()).toEqual([`run ${ok.id}`, `run ${bad.id}`].sort());
    expect(outcomes.sort()).toEqual(['handler failed', 'ok']);
    expect((await store.getJob(bad.id))?.state).toBe('deadletter');

    remove();
    const third = await e.enqueue('work', 'ok');
    await waitFor(async () => (await store.getJob(third.id)) === null, 'the third run');
    expect(seen).toHaveLength(3);
    expect(seen[2]).toBeUndefined();
  });

  it('rejects hooks that are not functions, and unknown hook names', () => {
    const client = new JobEngine({ store: new MemoryJobStore() });
    expect(() => client.use({ run: 'nope' } as never)).toThrow(ValidationError);
    expect(() => client.use({ before: () => undefined } as never)).toThrow(/hooks\.before/);
  });
});
