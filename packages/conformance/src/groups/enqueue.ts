import type { Job, NewJob } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, makeNewJob, refOf, storeNow } from '../harness.js';

/** Ids, result order, stored fields and unique keys (invariant 11). */
export function enqueueGroup(h: Harness): void {
  it('ids are decimal strings that increase in insertion order', async () => {
    const store = await h.open();
    const first = await enqueueJobs(store, [{}, {}, {}]);
    const second = await enqueueJobs(store, [{}]);
    const ids = [...first, ...second].map((j) => j.id);
    for (const id of ids) expect(id).toMatch(/^[0-9]+$/);
    const numbers = ids.map(Number);
    expect([...numbers].sort((a, b) => a - b)).toEqual(numbers);
    expect(new Set(numbers).size).toBe(numbers.length);
  });

  it('results come back in input order with created: true', async () => {
    const store = await h.open();
    const types = ['c', 'a', 'b', 'a'];
    const results = await store.enqueue(types.map((type) => makeNewJob({ type })));
    expect(results.map((r) => r.job.type)).toEqual(types);
    expect(results.map((r) => r.created)).toEqual([true, true, true, true]);
  });

  it('an empty batch returns an empty array and writes nothing', async () => {
    const store = await h.open();
    expect(await store.enqueue([])).toEqual([]);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('every field of a new job is stored and read back as given', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const dueAt = new Date(now + 3_600_123);
    const occurrence = new Date(now - 61_007);
    const payload = {
      text: 'grüße ✓ "quoted" \\ back',
      n: -1.5,
      nested: { list: [1, null, true] },
    };
    const [job] = await enqueueJobs(store, [
      {
        type: 'report.build',
        payload,
        dueAt,
        priority: -7,
        retries: 5,
        scope: 'account-42',
        exclusive: true,
        key: 'report:42',
        tenantId: 'tenant-a',
        queue: 'reports',
        retryPolicy: {
          kind: 'exponential',
          initialMs: 1000,
          factor: 3,
          maxMs: 60_000,
          jitter: 0.1,
        },
        schedule: 'nightly',
        occurrence,
        shard: { index: 2, count: 4 },
      },
    ]);
    const expected: Partial<Job> = {
      type: 'report.build',
      payload,
      state: 'timer',
      priority: -7,
      dueAt,
      retriesLeft: 5,
      attempts: 0,
      scope: 'account-42',
      exclusive: true,
      key: 'report:42',
      tenantId: 'tenant-a',
      queue: 'reports',
      lastError: null,
      lockOwner: null,
      lockExpiresAt: null,
      lockToken: null,
      retryPolicy: { kind: 'exponential', initialMs: 1000, factor: 3, maxMs: 60_000, jitter: 0.1 },
      suspendedFrom: null,
      schedule: 'nightly',
      occurrence,
      shard: { index: 2, count: 4 },
    };
    expect(job).toMatchObject(expected);
    await h.expectStored(store, job!.id, expected);
  });

  it('enqueue returns each new job exactly as reading it back gives it: alone, in a batch, keyed', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const rich: Partial<NewJob> = {
      type: 'report.build',
      payload: { text: 'grüße ✓ "quoted"', n: -1.5, nested: { list: [1, null, true] } },
      dueAt: new Date(now + 3_600_123),
      delayMs: 250,
      priority: -7,
      retries: 5,
      scope: 'account-42',
      exclusive: true,
      tenantId: 'tenant-a',
      queue: 'reports',
      retryPolicy: { kind: 'exponential', initialMs: 1000, factor: 3, maxMs: 60_000, jitter: 0.1 },
      schedule: 'nightly',
      occurrence: new Date(now - 61_007),
      shard: { index: 2, count: 4 },
      meta: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    };
    const { scopeLimits, timeLimits } = store.capabilities;
    const batches: NewJob[][] = [
      [makeNewJob(rich)],
      [
        makeNewJob(),
        makeNewJob({ ...rich, key: 'rich-key' }),
        makeNewJob({ dueAt: new Date(now - 5_000), priority: 3, payload: ['a', 2] }),
        makeNewJob({
          payload: undefined,
          scope: 'pool',
          ...(scopeLimits ? { scopeLimit: 3 } : {}),
        }),
        makeNewJob({ ...(timeLimits ? { timeoutMs: 5_000 } : {}), payload: 'text' }),
      ],
      // A run long enough for a store's multi-row insert.
      Array.from({ length: 40 }, (_, i) => makeNewJob({ payload: { i }, priority: i % 3 })),
    ];
    for (const batch of batches) {
      const results = await store.enqueue(batch);
      expect(results.map((r) => r.created)).toEqual(batch.map(() => true));
      for (const { job } of results) expect(await store.getJob(job.id)).toEqual(job);
    }
    // The caller's objects and the jobs share nothing.
    const payload = { list: [1] };
    const [copied] = await store.enqueue([makeNewJob({ payload })]);
    payload.list.push(2);
    expect(copied?.job.payload).toEqual({ list: [1] });
  });

  it('meta headers are stored in the insert and read back as given by every read', async () => {
    const store = await h.open();
    const trace = {
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tracestate: 'vendor=opaque,other=ü✓',
    };
    // Keys and values as the engine accepts them: any printable text, values also empty.
    const odd = { 'key with spaces': '', 'quote"\\back': 'emoji 😀, "quotes", \\ back' };
    // One job alone, a batch mixing meta and none, and keyed jobs: each store's insert paths.
    const [alone] = await enqueueJobs(store, [{ meta: trace }]);
    const batch = await enqueueJobs(store, [
      { meta: odd },
      { meta: null },
      { key: 'meta-key', meta: { traceparent: trace.traceparent } },
      {},
    ]);
    const [holder] = await enqueueJobs(store, [{ key: 'meta-key', meta: { other: 'ignored' } }]);
    const expected = [trace, odd, null, { traceparent: trace.traceparent }, null];
    const jobs = [alone, ...batch];
    expect(jobs.map((job) => job!.meta)).toEqual(expected);
    expect(holder!.meta).toEqual({ traceparent: trace.traceparent });
    for (const [i, job] of jobs.entries()) {
      await h.expectStored(store, job!.id, { meta: expected[i] as Job['meta'] });
      expect((await store.getJob(job!.id))!.meta).toEqual(expected[i]);
    }
    const listed = await store.listJobs({ limit: 10, offset: 0 });
    expect(listed.map((job) => job.meta)).toEqual(expected);
    const acquired = await acquire(store, { limit: 10 });
    expect(new Map(acquired.map((job) => [job.id, job.meta]))).toEqual(
      new Map(jobs.map((job, i) => [job!.id, expected[i]])),
    );
  });

  it('a job due now or in the past is async, a job due later is a timer', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const [plain, past, delayed, future] = await enqueueJobs(store, [
      {},
      { dueAt: new Date(now - 60_000) },
      { delayMs: 60_000 },
      { dueAt: new Date(now + 60_000) },
    ]);
    expect(plain!.state).toBe('async');
    expect(past!.state).toBe('async');
    expect(past!.dueAt.getTime()).toBe(now - 60_000);
    expect(delayed!.state).toBe('timer');
    expect(future!.state).toBe('timer');
    await h.expectStored(store, delayed!.id, { state: 'timer' });
  });

  it('due time is (dueAt ?? now) + delayMs on the store clock', async () => {
    const store = await h.open();
    const before = await storeNow(store);
    const [relative, absolute] = await enqueueJobs(store, [
      { delayMs: 5_000 },
      { dueAt: new Date(before + 10_000), delayMs: 2_500 },
    ]);
    const after = await storeNow(store);
    expect(relative!.dueAt.getTime()).toBeGreaterThanOrEqual(before + 5_000);
    expect(relative!.dueAt.getTime()).toBeLessThanOrEqual(after + 5_000);
    expect(absolute!.dueAt.getTime()).toBe(before + 12_500);
    expect(relative!.createdAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(relative!.createdAt.getTime()).toBeLessThanOrEqual(after);
  });

  it('names of 255 characters, including non-BMP characters, are stored as given', async () => {
    const store = await h.open();
    const name = (tag: string) => `${tag}-ключ-🔑-${'x'.repeat(255)}`.slice(0, 253) + '🔑';
    const fields = {
      type: name('type'),
      scope: name('scope'),
      key: name('key'),
      tenantId: name('tenant'),
      queue: name('queue'),
      schedule: name('schedule'),
    };
    for (const value of Object.values(fields)) expect(value.length).toBe(255);
    const [job] = await enqueueJobs(store, [fields]);
    await h.expectStored(store, job!.id, fields);
    const [again] = await store.enqueue([makeNewJob(fields)]);
    expect(again).toMatchObject({ created: false, job: { id: job!.id } });
  });

  it('priorities of ±(2^31 - 1) are stored and ordered', async () => {
    const store = await h.open();
    const [low, high] = await enqueueJobs(store, [
      { priority: -2_147_483_647 },
      { priority: 2_147_483_647 },
    ]);
    await h.expectStored(store, low!.id, { priority: -2_147_483_647 });
    expect((await acquire(store)).map((j) => j.id)).toEqual([high!.id, low!.id]);
  });

  it('a payload of almost 1 MiB (the engine’s default limit) round-trips', async () => {
    const store = await h.open();
    const chunk = 'päyload-🔑-'.repeat(100);
    const payload = { items: Array.from({ length: 700 }, (_, i) => `${i}:${chunk}`) };
    expect(Buffer.byteLength(JSON.stringify(payload))).toBeLessThan(1024 * 1024);
    expect(Buffer.byteLength(JSON.stringify(payload))).toBeGreaterThan(900 * 1024);
    const [job] = await enqueueJobs(store, [{ payload }]);
    expect((await store.getJob(job!.id))!.payload).toEqual(payload);
  });

  it('ids are never reused, even after the newest job is deleted', async () => {
    const store = await h.open();
    const [a, b] = await enqueueJobs(store, [{}, {}]);
    expect(await store.deleteJob(b!.id)).toBe(true);
    expect(await store.deleteJob(a!.id)).toBe(true);
    const [c] = await enqueueJobs(store, [{}]);
    expect(Number(c!.id)).toBeGreaterThan(Number(b!.id));
  });

  it('payloads of every JSON kind round-trip', async () => {
    const store = await h.open();
    const payloads = [null, 0, 'text', true, [1, 'two', { three: 3 }], { a: { b: { c: [] } } }];
    const jobs = await enqueueJobs(
      store,
      payloads.map((payload) => ({ payload })),
    );
    for (const [i, job] of jobs.entries()) {
      expect((await store.getJob(job.id))?.payload).toEqual(payloads[i]);
    }
  });

  it('mutating a returned job or the enqueued payload does not change the stored job', async () => {
    const store = await h.open();
    const payload = { list: [1, 2] };
    const [job] = await enqueueJobs(store, [{ payload }]);
    payload.list.push(3);
    (job!.payload as { list: number[] }).list.push(4);
    expect((await store.getJob(job!.id))?.payload).toEqual({ list: [1, 2] });
  });

  it('enqueuing a key held by an unfinished job returns that job with created: false', async () => {
    const store = await h.open();
    const [first] = await store.enqueue([makeNewJob({ key: 'k', payload: { v: 1 } })]);
    const [again] = await store.enqueue([makeNewJob({ key: 'k', payload: { v: 2 } })]);
    expect(first!.created).toBe(true);
    expect(again!.created).toBe(false);
    expect(again!.job.id).toBe(first!.job.id);
    expect(again!.job.payload).toEqual({ v: 1 });
    expect(await store.listJobs({ limit: 10, offset: 0 })).toHaveLength(1);
  });

  it('a duplicate key later in the same batch returns the job created earlier in the batch', async () => {
    const store = await h.open();
    const results = await store.enqueue([
      makeNewJob({ key: 'a' }),
      makeNewJob({ key: 'b' }),
      makeNewJob({ key: 'a' }),
      makeNewJob(),
    ]);
    expect(results.map((r) => r.created)).toEqual([true, true, false, true]);
    expect(results[2]!.job.id).toBe(results[0]!.job.id);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toHaveLength(3);
  });

  it('a batch of 1,203 with keyed jobs among runs of keyless ones comes back in input order, each job as given', async () => {
    const store = await h.open();
    // Keys at 0, 250, …: runs of keyless jobs longer and shorter than a store's insert chunk;
    // the key at 1,000 is the one at 250 again.
    const keyOf = (i: number): string | null =>
      i % 250 === 0 ? `k${i === 1_000 ? 250 : i}` : i === 1_202 ? 'last' : null;
    const batch = Array.from({ length: 1_203 }, (_, i) =>
      makeNewJob({ payload: { i }, key: keyOf(i), priority: i % 7 }),
    );
    const results = await store.enqueue(batch);
    expect(results).toHaveLength(batch.length);
    for (const [i, { job, created }] of results.entries()) {
      expect(created).toBe(i !== 1_000);
      expect(job.payload).toEqual({ i: i === 1_000 ? 250 : i });
      expect(job.key).toBe(keyOf(i));
      expect(job.priority).toBe((i === 1_000 ? 250 : i) % 7);
    }
    expect(results[1_000]!.job.id).toBe(results[250]!.job.id);
    const created = results.filter((r) => r.created).map((r) => Number(r.job.id));
    expect([...created].sort((a, b) => a - b)).toEqual(created);
    expect(new Set(created).size).toBe(1_202);
    for (const i of [0, 249, 251, 499, 500, 501, 999, 1_001, 1_202]) {
      expect(await store.getJob(results[i]!.job.id)).toEqual(results[i]!.job);
    }
  });

  it('a key is unique across types and states: running and deadletter jobs still hold it', async () => {
    const store = await h.open();
    const [running, dead] = await enqueueJobs(store, [{ key: 'r' }, { key: 'd', retries: 0 }]);
    const held = await acquire(store);
    const deadRef = refOf(held.find((j) => j.id === dead!.id)!);
    await store.fail([
      { ...deadRef, error: { message: 'x', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]);
    const again = await store.enqueue([
      makeNewJob({ key: 'r', type: 'other' }),
      makeNewJob({ key: 'd' }),
    ]);
    expect(again.map((r) => [r.created, r.job.id])).toEqual([
      [false, running!.id],
      [false, dead!.id],
    ]);
    expect(again[1]!.job.state).toBe('deadletter');
  });

  it('a key is free again once its job completed or was deleted', async () => {
    const store = await h.open();
    const [a, b] = await enqueueJobs(store, [{ key: 'done' }, { key: 'deleted' }]);
    const [held] = await acquire(store, { limit: 1 });
    expect(held!.id).toBe(a!.id);
    expect(await store.complete([refOf(held!)])).toEqual({ lost: [] });
    expect(await store.deleteJob(b!.id)).toBe(true);
    const again = await store.enqueue([
      makeNewJob({ key: 'done' }),
      makeNewJob({ key: 'deleted' }),
    ]);
    expect(again.map((r) => r.created)).toEqual([true, true]);
    expect(again[0]!.job.id).not.toBe(a!.id);
  });

  it(
    'concurrent batches with overlapping keys in opposite orders both succeed and share the jobs',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store, 2);
      for (let round = 0; round < h.rounds; round++) {
        const keys = Array.from({ length: 8 }, (_, i) => `r${round}-k${i}`);
        const [forward, backward] = await Promise.all([
          peers[0]!.enqueue(keys.map((key) => makeNewJob({ key }))),
          peers[1]!.enqueue([...keys].reverse().map((key) => makeNewJob({ key }))),
        ]);
        const byKey = new Map(forward!.map((r) => [r.job.key, r.job.id]));
        for (const r of backward!)
          expect(r.job.id, `round ${round} key ${r.job.key}`).toBe(byKey.get(r.job.key));
        expect(
          [...forward!, ...backward!].filter((r) => r.created),
          `round ${round}`,
        ).toHaveLength(keys.length);
      }
    },
    h.raceTimeout(),
  );

  it(
    'concurrent enqueues of one key from several peers create exactly one job',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      for (let round = 0; round < h.rounds; round++) {
        const key = `race-${round}`;
        const results = await Promise.all(
          peers.map((p, i) => p.enqueue([makeNewJob({ key, payload: { peer: i } })])),
        );
        const flat = results.flat();
        expect(
          flat.filter((r) => r.created),
          `round ${round}`,
        ).toHaveLength(1);
        expect(new Set(flat.map((r) => r.job.id)).size, `round ${round}`).toBe(1);
      }
      expect(await store.listJobs({ limit: 1000, offset: 0 })).toHaveLength(h.rounds);
    },
    h.raceTimeout(),
  );
}
