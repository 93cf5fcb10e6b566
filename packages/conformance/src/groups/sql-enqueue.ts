import { type Job, JobEngine, type JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, type Harness, refOf, waitFor } from '../harness.js';

/** A job's fields that say what was enqueued: all but its id and times. */
function enqueued(job: Job | null): Record<string, unknown> | null {
  if (job === null) return null;
  const { id: _id, createdAt: _c, dueAt: _d, key, ...rest } = job;
  // Keys differ between the two paths (the second would get the first's holder back).
  return { ...rest, key: key === null ? null : key.replace(/^(sql|engine)-/, '') };
}

async function jobCount(store: JobStore): Promise<number> {
  return (await store.listJobs({ limit: 1000, offset: 0 })).length;
}

/**
 * Invariant 24: a job enqueued from SQL (PostgreSQL's `enqueue` function, MySQL's procedure,
 * SQLite's insertable view) keeps the rules of `engine.enqueue`: the same stored job for the
 * same options, inside a caller's transaction too, bad input refused naming the field with
 * nothing written, held keys returning their holder, and a running engine woken to run it. The
 * bulk entry points (`enqueue_many`, given `sqlEnqueueMany`) write the jobs `enqueueMany` writes,
 * in order, and refuse bad input, an oversized payload or a key with nothing written.
 */
export function sqlEnqueueGroup(h: Harness): void {
  const call = (
    store: JobStore,
    type: string,
    payload: unknown,
    options: unknown,
    tx?: unknown,
  ): Promise<string> => {
    const sql = h.options.sqlEnqueue;
    if (!sql) throw new Error('sql-enqueue group needs options.sqlEnqueue');
    return sql(
      store,
      { type, payload: JSON.stringify(payload), options: JSON.stringify(options) },
      tx,
    );
  };

  it('a job enqueued through SQL reads back as engine.enqueue writes it, for each option', async () => {
    const viaEngine = await h.open();
    const viaSql = await h.open();
    const engine = new JobEngine({ store: viaEngine, handlers: { 'sql-work': async () => {} } });
    const runAt = '2031-02-03T04:05:06.789Z';
    const cases: { payload: unknown; options: Record<string, unknown> }[] = [
      { payload: { to: 'a@b.c', n: [1, 2.5, null, true] }, options: {} },
      { payload: null, options: { delayMs: 60_000, priority: 5, retries: 7, queue: 'q1' } },
      { payload: 'text', options: { runAt, tenantId: 't1', scope: 'one', exclusive: true } },
      {
        payload: { nested: { deep: ['x'] } },
        options: { scope: 'three', scopeLimit: 3, key: 'k1', meta: { trace: 'abc' } },
      },
      { payload: 42, options: { priority: -3, retries: 0, timeoutMs: 5_000, key: 'k2' } },
    ];
    for (const [i, { payload, options }] of cases.entries()) {
      const key = typeof options.key === 'string' ? options.key : null;
      const engineJob = await engine.enqueue('sql-work', payload, {
        ...options,
        ...(options.runAt ? { runAt: new Date(runAt) } : {}),
        ...(key ? { key: `engine-${key}` } : {}),
      } as never);
      const id = await call(viaSql, 'sql-work', payload, {
        ...options,
        ...(key ? { key: `sql-${key}` } : {}),
      });
      const sqlJob = await viaSql.getJob(id);
      const stored = await viaEngine.getJob(engineJob.id);
      expect(enqueued(sqlJob), `case ${i}`).toEqual(enqueued(stored));
      // Due times: the same instant when given, else after the store's now by the delay (the
      // state, compared above, says whether it is due yet).
      if (options.runAt) expect(sqlJob?.dueAt.toISOString()).toBe(runAt);
      if (typeof options.delayMs === 'number') {
        expect(sqlJob!.dueAt.getTime()).toBeGreaterThan(sqlJob!.createdAt.getTime());
      }
    }
  });

  it('inside a caller transaction: a rollback leaves nothing, a commit keeps the job', async (ctx) => {
    const given = h.options.transaction;
    if (!given) ctx.skip('no `transaction` hooks: the store has no caller transactions');
    const hooks = given as NonNullable<typeof given>;
    const store = await h.open();
    const rolledBack = await hooks.begin(store);
    try {
      await call(store, 'sql-work', { n: 1 }, { key: 'tx-key' }, rolledBack);
    } finally {
      await hooks.rollback(rolledBack);
    }
    expect(await jobCount(store)).toBe(0);
    const committed = await hooks.begin(store);
    let id: string;
    try {
      id = await call(store, 'sql-work', { n: 2 }, { key: 'tx-key' }, committed);
    } catch (error) {
      await hooks.rollback(committed);
      throw error;
    }
    await hooks.commit(committed);
    const job = await store.getJob(id);
    expect(job).toMatchObject({
      type: 'sql-work',
      payload: { n: 2 },
      key: 'tx-key',
      state: 'async',
    });
    expect(await jobCount(store)).toBe(1);
  });

  it('refuses bad input with an error naming the field, and writes nothing', async () => {
    const store = await h.open();
    const bad: [string, unknown, unknown, RegExp][] = [
      ['', null, {}, /\btype\b/],
      ['sql-work', null, { delayMs: -1 }, /delayMs/],
      ['sql-work', null, { priority: 1.5 }, /priority/],
      ['sql-work', null, { retries: 'many' }, /retries/],
      ['sql-work', null, { bogus: 1 }, /bogus|unknown option/],
      ['sql-work', null, { keyMode: 'replace' }, /keyMode/],
      ['sql-work', null, { keyMode: 'sometimes', key: 'k' }, /keyMode/],
      ['sql-work', null, { exclusive: true }, /exclusive/],
      ['sql-work', null, { scope: 's', scopeLimit: 0 }, /scopeLimit/],
      ['sql-work', null, { runAt: 'not a time' }, /runAt/],
      ['sql-work', null, { runAt: '2030-01-01T00:00:00Z', delayMs: 5 }, /delayMs/],
      ['sql-work', null, { queue: '' }, /queue/],
      ['sql-work', null, { tenantId: 'a\nb' }, /tenantId/],
      ['sql-work', null, { meta: { a: 1 } }, /meta/],
      ['sql-work', null, [1, 2], /options/],
    ];
    for (const [type, payload, options, field] of bad) {
      await expect(
        call(store, type, payload, options),
        `${type} ${JSON.stringify(options)}`,
      ).rejects.toThrow(field);
    }
    expect(await jobCount(store)).toBe(0);
  });

  it('a held key returns its holder, whichever way either was enqueued; replace changes it', async () => {
    const store = await h.open();
    const engine = new JobEngine({ store, handlers: { 'sql-work': async () => {} } });
    const first = await call(store, 'sql-work', { v: 1 }, { key: 'held' });
    expect(await call(store, 'sql-work', { v: 2 }, { key: 'held' })).toBe(first);
    expect((await engine.enqueue('sql-work', { v: 3 }, { key: 'held' })).id).toBe(first);
    const fromEngine = await engine.enqueue('sql-work', { v: 1 }, { key: 'engine-held' });
    expect(await call(store, 'sql-work', { v: 2 }, { key: 'engine-held' })).toBe(fromEngine.id);
    expect((await store.getJob(first))?.payload).toEqual({ v: 1 });
    // replace: the waiting holder takes the new payload and due time.
    expect(
      await call(store, 'sql-work', { v: 4 }, { key: 'held', keyMode: 'replace', delayMs: 60_000 }),
    ).toBe(first);
    const replaced = await store.getJob(first);
    expect(replaced).toMatchObject({ payload: { v: 4 }, state: 'timer' });
    // debounce: the later due time stays.
    expect(await call(store, 'sql-work', { v: 5 }, { key: 'held', keyMode: 'debounce' })).toBe(
      first,
    );
    const debounced = await store.getJob(first);
    expect(debounced).toMatchObject({ payload: { v: 5 }, state: 'timer' });
    expect(debounced?.dueAt.getTime()).toBe(replaced?.dueAt.getTime());
    expect(await jobCount(store)).toBe(2);
  });

  it('replace and debounce of a running holder queue one follow-up, enqueued when it finishes', async () => {
    const store = await h.open();
    const holderId = await call(store, 'work', 1, { key: 'run-key', scope: 'sc', queue: 'q' });
    const [running] = await acquire(store);
    expect(running?.id).toBe(holderId);
    const options = { key: 'run-key', scope: 'sc', queue: 'q', meta: { m: 'x' }, delayMs: 60_000 };
    expect(await call(store, 'work', 8, { ...options, keyMode: 'replace' })).toBe(holderId);
    expect(await call(store, 'work', 9, { ...options, keyMode: 'debounce' })).toBe(holderId);
    // Nothing beside the running holder while it runs, and the holder is unchanged.
    expect(await store.listJobs({ key: 'run-key', limit: 10, offset: 0 })).toEqual([running]);
    await store.complete([refOf(running as Job)]);
    const [next] = await store.listJobs({ key: 'run-key', limit: 10, offset: 0 });
    expect(next).toMatchObject({
      type: 'work',
      payload: 9,
      state: 'timer',
      scope: 'sc',
      queue: 'q',
      meta: { m: 'x' },
      attempts: 0,
    });
    expect(next?.id).not.toBe(holderId);
    expect(next!.dueAt.getTime()).toBeGreaterThan(next!.createdAt.getTime());
  });

  it('a subscriber on another connection is woken by an SQL enqueue', async (ctx) => {
    const store = await h.open();
    if (!store.capabilities.notifications) ctx.skip('the store declares notifications: false');
    const peer = await h.peer(store);
    let wakeUps = 0;
    const unsubscribe = peer.subscribe!(() => {
      wakeUps += 1;
    });
    try {
      // A listener that connects asynchronously may miss a call made before it is ready: call
      // again every 100 ms until it is woken (as the notifications group enqueues).
      let last = Number.NEGATIVE_INFINITY;
      await waitFor(
        'a wake-up from an SQL enqueue',
        async () => {
          if (wakeUps > 0) return true;
          if (Date.now() - last >= 100) {
            last = Date.now();
            await call(store, 'sql-work', { n: 1 }, {});
          }
          return wakeUps > 0;
        },
        h.timeoutMs / 3,
      );
    } finally {
      unsubscribe();
    }
  });

  it('a batch through the bulk entry point reads back as engine.enqueueMany writes it, in order; bad input or a key writes nothing', async (ctx) => {
    const many = h.options.sqlEnqueueMany;
    if (!many) ctx.skip('no `sqlEnqueueMany` given (the store has no bulk SQL enqueue)');
    const bulk = many as NonNullable<typeof many>;
    const viaEngine = await h.open();
    const viaSql = await h.open();
    const engine = new JobEngine({ store: viaEngine, handlers: { 'sql-work': async () => {} } });
    const payloads = [{ n: 1, deep: { x: [1, 'two'] } }, 'text', null, 2.5, [true, false], 7];
    const options = {
      delayMs: 60_000,
      priority: 5,
      retries: 2,
      queue: 'q1',
      tenantId: 't1',
      scope: 'bulk',
      scopeLimit: 3,
      meta: { trace: 'abc' },
      timeoutMs: 5_000,
    };
    const byId = (jobs: Job[]) => [...jobs].sort((a, b) => Number(a.id) - Number(b.id));
    await engine.enqueueMany(payloads.map((payload) => ({ type: 'sql-work', payload, options })));
    await bulk(viaSql, {
      type: 'sql-work',
      payloads: JSON.stringify(payloads),
      options: JSON.stringify(options),
    });
    const fromEngine = byId(await viaEngine.listJobs({ limit: 100, offset: 0 }));
    const fromSql = byId(await viaSql.listJobs({ limit: 100, offset: 0 }));
    expect(fromSql.map((job) => job.payload)).toEqual(payloads);
    expect(fromSql.map(enqueued)).toEqual(fromEngine.map(enqueued));
    for (const job of fromSql) {
      expect(job.dueAt.getTime()).toBe(fromSql[0]?.dueAt.getTime());
      expect(job.dueAt.getTime()).toBeGreaterThan(job.createdAt.getTime());
    }

    const store = await h.open();
    const bad: [string, string, unknown, RegExp][] = [
      ['sql-work', '{"not": "an array"}', {}, /payloads/],
      ['', '[1, 2]', {}, /\btype\b/],
      ['sql-work', '[1, 2]', { delayMs: -1 }, /delayMs/],
      ['sql-work', '[1, 2]', { key: 'k' }, /options\.key/],
      ['sql-work', '[1, 2]', { keyMode: 'replace' }, /key/],
      ['sql-work', JSON.stringify([1, 'x'.repeat(1_048_577)]), {}, /payloads|payload/],
    ];
    for (const [type, texts, opts, field] of bad) {
      await expect(
        bulk(store, { type, payloads: texts, options: JSON.stringify(opts) }),
        `${type} ${texts.slice(0, 40)} ${JSON.stringify(opts)}`,
      ).rejects.toThrow(field);
    }
    await bulk(store, { type: 'sql-work', payloads: '[]', options: '{}' });
    expect(await jobCount(store)).toBe(0);
  });

  it('a running engine runs a job enqueued through SQL', async () => {
    const store = await h.open();
    const ran: unknown[] = [];
    const engine = new JobEngine({
      store,
      handlers: { 'sql-work': async (job: Job) => void ran.push(job.payload) },
    });
    h.defer(() => engine.stop({ timeoutMs: 1_000 }));
    await engine.start();
    await call(store, 'sql-work', { from: 'sql' }, {});
    await waitFor('the SQL-enqueued job to run', async () => ran.length > 0, h.timeoutMs / 2);
    expect(ran).toEqual([{ from: 'sql' }]);
  });
}
