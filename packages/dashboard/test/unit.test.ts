/** The dashboard on the reference store, and the parts that need no browser. */
import {
  BULK_BATCH,
  DEFAULT_RETRIES,
  type Job,
  JobAdmin,
  JobEngine,
  type JobFilter,
  type JobStore,
  type ListJobsRequest,
  MemoryJobStore,
  silentLogger,
  UnrecoverableError,
} from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { layersOf } from '../src/graph.js';
import { escapeHtml } from '../src/html.js';
import { createDashboard } from '../src/index.js';
import { flowCounts } from '../src/pages/flows.js';
import { readJobsPage, SlowReadCache, scanJobs } from '../src/reads.js';
import {
  duration,
  inZone,
  jobWait,
  relativeText,
  scopeLimitOf,
  scopeLimitText,
  shellWord,
} from '../src/text.js';

async function storeWithJobs(n: number): Promise<MemoryJobStore> {
  const store = new MemoryJobStore();
  const engine = new JobEngine({ store, logger: silentLogger });
  await engine.enqueueMany(
    Array.from({ length: n }, (_, i) => ({
      type: i % 2 === 0 ? 'even' : 'odd',
      payload: { i },
      options: i === 5 ? { key: 'five' } : {},
    })),
  );
  return store;
}

/** A store written before `afterId` and `key` existed: it ignores both. */
function oldStore(store: MemoryJobStore): MemoryJobStore {
  return new Proxy(store, {
    get(target, name, receiver) {
      if (name === 'listJobs') {
        return ({ afterId: _a, key: _k, ...rest }: ListJobsRequest & JobFilter) =>
          target.listJobs(rest);
      }
      const value = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('dashboard reads', () => {
  it('escapeHtml escapes the five HTML characters', () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
      '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;',
    );
  });

  it('pages by keyset, and by offset on a store that ignores afterId', async () => {
    const store = await storeWithJobs(120);
    for (const s of [store, oldStore(store)]) {
      const ids: string[] = [];
      let position = { afterId: null as string | null, offset: 0 };
      let keyset = true;
      for (;;) {
        const page = await readJobsPage(new JobAdmin(s), {}, position, 50);
        keyset &&= page.keyset;
        ids.push(...page.jobs.map((job) => job.id));
        const last = page.jobs[page.jobs.length - 1];
        if (!page.hasMore || !last) break;
        position = { afterId: last.id, offset: position.offset + page.jobs.length };
      }
      expect(new Set(ids).size).toBe(120);
      expect(keyset).toBe(s === store);
    }
  });

  it('filters by key also on a store that ignores the key filter', async () => {
    const store = await storeWithJobs(20);
    for (const s of [store, oldStore(store)]) {
      const { jobs } = await scanJobs(new JobAdmin(s), { key: 'five' }, 100);
      expect(jobs.map((job) => (job.payload as { i: number }).i)).toEqual([5]);
    }
  });

  it('countJobs stops at its cap', async () => {
    const store = await storeWithJobs(30);
    expect(await store.bulk.countJobs({}, 10)).toBe(10);
    expect(await store.bulk.countJobs({ type: 'odd' })).toBe(15);
  });

  it('SlowReadCache shares one read between concurrent callers', async () => {
    const cache = new SlowReadCache<number>();
    let loads = 0;
    const load = async (): Promise<number> => {
      loads += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return loads;
    };
    const [a, b] = await Promise.all([cache.read(load), cache.read(load)]);
    expect([a.data, b.data, loads]).toEqual([1, 1, 1]);
    // Fast reads are not reused.
    expect((await cache.read(load)).data).toBe(2);
  });
});

describe('dashboard on MemoryJobStore', () => {
  it('renders every page of a store without history', async () => {
    const store = await storeWithJobs(5);
    const dashboard = createDashboard({ store, logger: silentLogger });
    for (const path of [
      '/',
      '/jobs',
      '/jobs?state=async&type=odd',
      '/jobs/1',
      '/deadletter',
      '/schedules',
      '/history',
    ]) {
      const response = await dashboard.fetch(new Request(`http://localhost${path}`));
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    }
    expect((await dashboard.fetch(new Request('http://localhost/jobs/999'))).status).toBe(404);
    const stats = (await (
      await dashboard.fetch(new Request('http://localhost/api/stats'))
    ).json()) as {
      groups: { type: string; state: string; count: number }[];
    };
    expect(stats.groups.reduce((sum, g) => sum + g.count, 0)).toBe(5);
    const jobs = await dashboard.fetch(new Request('http://localhost/api/jobs?type=odd'));
    expect(jobs.headers.get('content-type')).toContain('application/json');
    expect(await jobs.json()).toMatchObject({ total: 2, totalCapped: false, next: null });
    expect(
      await (await dashboard.fetch(new Request('http://localhost/api/jobs/1'))).json(),
    ).toMatchObject({ id: '1', type: 'even' });
    expect((await dashboard.fetch(new Request('http://localhost/api/jobs/999'))).status).toBe(404);
    expect((await dashboard.fetch(new Request('http://localhost/api/nothing'))).status).toBe(404);
    expect((await dashboard.fetch(new Request('http://localhost/nowhere'))).status).toBe(404);
    expect(
      (await dashboard.fetch(new Request('http://localhost/jobs', { method: 'PUT' }))).status,
    ).toBe(405);
  });
});

describe('a job acquired but not started, and one running', () => {
  it('the job page tells a prefetched job from an executing one (start marks) and shows its log and steps', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store, logger: silentLogger });
    await client.enqueue('work', {}, { priority: 1 });
    await client.enqueue('work', {}, { priority: 0 });
    const [running, prefetched] = await store.acquire({
      owner: 'worker-1',
      limit: 2,
      leaseMs: 60_000,
      types: ['work'],
      queues: null,
      tenants: null,
      start: 1,
    });
    await store.renewLeases('worker-1', 60_000, [
      {
        id: (running as Job).id,
        token: (running as Job).lockToken as string,
        logsJson: JSON.stringify([{ at: Date.UTC(2026, 10, 27, 9), message: 'fetched <3> rows' }]),
      },
    ]);
    const steps = [
      {
        name: 'charge<1>',
        result: { id: 'ch_<1>' },
        at: Date.UTC(2026, 10, 27, 9, 1),
        durationMs: 12,
      },
    ];
    expect(
      await store.steps.save(
        { id: (running as Job).id, token: (running as Job).lockToken as string },
        JSON.stringify(steps),
      ),
    ).toBe(true);
    const dashboard = createDashboard({ store, logger: silentLogger });
    const text = async (id: string) =>
      (await dashboard.fetch(new Request(`http://localhost/jobs/${id}`))).text();
    const pre = await text((prefetched as Job).id);
    expect(pre).toContain('not started yet');
    expect(pre).toContain('waiting in its owner');
    const run = await text((running as Job).id);
    expect(run).toContain('running attempt 1 since');
    // Its log, escaped.
    expect(run).toContain('2026-11-27T09:00:00.000Z  fetched &lt;3&gt; rows');
    // Its steps, escaped.
    expect(run).toContain('Steps <span class="muted small">1 done</span>');
    expect(run).toMatch(
      /<td class="mono">charge&lt;1&gt;<\/td><td>2026-11-27 09:01:00 UTC<\/td><td>[^<]+<\/td><td><code>\{&quot;id&quot;:&quot;ch_&lt;1&gt;&quot;\}<\/code>/,
    );
    expect(run).not.toContain('not started yet');
  });
});

describe('a job parked by ctx.sleep or ctx.waitFor', () => {
  it('the job page and the jobs list say what it waits for, until when; not once it resumed', async () => {
    const store = new MemoryJobStore();
    let resume: (approval: unknown) => void = () => {};
    const resumed = new Promise<unknown>((resolve) => {
      resume = resolve;
    });
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      pollIntervalMs: 25,
      handlers: {
        nap: async (_job, ctx) => ctx.sleep('cool<off>', 3_600_000),
        approve: async (_job, ctx) => {
          await ctx.step('charge', async () => ({ id: 'ch_1' }));
          resume(await ctx.waitFor('approval', { key: 'o-1', timeoutMs: 86_400_000 }));
        },
      },
    });
    const dashboard = createDashboard({ store, logger: silentLogger });
    const text = async (path: string) =>
      (await dashboard.fetch(new Request(`http://localhost${path}`))).text();
    const parked = async (id: string): Promise<void> => {
      for (;;) {
        const job = await store.getJob(id);
        if (job?.state === 'timer' && job.steps?.length) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    await engine.start();
    try {
      const nap = await engine.enqueue('nap', {});
      const approve = await engine.enqueue('approve', {});
      await parked(nap.id);
      await parked(approve.id);

      const napPage = await text(`/jobs/${nap.id}`);
      expect(napPage).toContain(
        'sleeping (<code>ctx.sleep</code> <span class="mono">cool&lt;off&gt;</span>) until its wake time',
      );
      expect(napPage).toMatch(
        /<h2>Sleeping<\/h2><dl class="kv"><dt>Sleep<\/dt><dd><span class="mono">cool&lt;off&gt;<\/span><\/dd>\n<dt>Wakes<\/dt><dd><time [^>]+>in [^<]+<\/time> <span class="muted small">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC<\/span><\/dd>/,
      );
      const approvePage = await text(`/jobs/${approve.id}`);
      expect(approvePage).toContain(
        'waiting for signal <span class="mono">approval</span> (<code>ctx.waitFor</code> <span class="mono">approval</span>) or its timeout',
      );
      expect(approvePage).toMatch(
        /<h2>Waiting for a signal<\/h2><dl class="kv"><dt>Signal<\/dt><dd><span class="mono">approval<\/span><\/dd>\n<dt>Key<\/dt><dd><span class="mono">o-1<\/span><\/dd>\n<dt>Times out<\/dt><dd><time [^>]+>in [^<]+<\/time>/,
      );
      expect(approvePage).toContain('<code>jobsctl signal approval --key o-1 ');
      // The list: a note under each one's state.
      const list = await text('/jobs?state=timer');
      expect(list).toMatch(
        /<div class="muted small wait">sleeps · wakes <time [^>]+>in [^<]+<\/time><\/div>/,
      );
      expect(list).toMatch(
        /<div class="muted small wait">waits for signal <span class="mono">approval<\/span> · times out <time [^>]+>in [^<]+<\/time><\/div>/,
      );

      await engine.signal('approval', { key: 'o-1', payload: { ok: true } });
      expect(await resumed).toEqual({ ok: true });
      // Resumed: neither page nor list says it waits any more (its history record remains).
      for (;;) {
        const job = await store.getJob(approve.id);
        if (job?.state !== 'timer') break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(await text(`/jobs/${approve.id}`)).not.toContain('Waiting for a signal');
      expect(await text('/jobs')).not.toContain('waits for signal');
      expect(await text('/jobs')).toContain('sleeps · wakes');
    } finally {
      await engine.stop();
    }
  });
});

/** `store` with some methods replaced (the rest bound to it). */
function withMethods(store: MemoryJobStore, methods: Record<string, unknown>): JobStore {
  return new Proxy(store, {
    get(target, name, receiver) {
      if (typeof name === 'string' && Object.hasOwn(methods, name)) return methods[name];
      const value = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** Leases one job of `type` as a worker would: it is then running. */
async function runOne(store: JobStore, type: string): Promise<Job> {
  const [job] = await store.acquire({
    owner: 'worker-1',
    limit: 1,
    leaseMs: 60_000,
    types: [type],
    queues: null,
    tenants: null,
  });
  if (!job) throw new Error(`no ${type} job to acquire`);
  return job;
}

/** Sends a dashboard form as its page would: the page's CSRF cookie and token, then the POST. */
async function submit(
  dashboard: ReturnType<typeof createDashboard>,
  page: string,
  action: string,
  fields: Record<string, string>,
): Promise<Response> {
  const view = await dashboard.fetch(new Request(`http://localhost${page}`));
  const cookie = (view.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const token = /name="_csrf" value="([^"]+)"/.exec(await view.text())?.[1] ?? '';
  expect(token).not.toBe('');
  return dashboard.fetch(
    new Request(`http://localhost${action}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: token, ...fields }).toString(),
    }),
  );
}

describe('deleting jobs that run', () => {
  it('bulk delete says how many had started meanwhile and only got a cancel request', async () => {
    const store = new MemoryJobStore();
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      pollIntervalMs: 25,
      handlers: {
        flaky: async () => {
          throw new UnrecoverableError('boom');
        },
      },
    });
    await engine.start();
    await engine.enqueueMany([1, 2, 3].map((i) => ({ type: 'flaky', payload: { i } })));
    for (let i = 0; i < 200 && (await store.bulk.countJobs({ state: 'deadletter' })) < 3; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await engine.stop();
    const [first] = await store.listJobs({ state: 'deadletter', limit: 1, offset: 0 });
    if (!first) throw new Error('no dead-letter job');
    // Between the bulk form's selection and its delete, someone retries the first job and a
    // worker picks it up; the store's deleteJob then flags a running job instead of deleting
    // it, as the JobStore contract says.
    const racing = withMethods(store, {
      deleteJob: async (id: string) => {
        if (id === first.id) {
          await store.retryDeadletter(id, 3);
          await runOne(store, 'flaky');
        }
        if ((await store.getJob(id))?.state === 'running') {
          await store.cancellation.cancel(id);
          return true;
        }
        return store.deleteJob(id);
      },
    });
    const dashboard = createDashboard({
      store: racing,
      authorize: () => true,
      logger: silentLogger,
    });
    const done = await submit(dashboard, '/deadletter', '/deadletter/bulk', {
      op: 'delete',
      type: 'flaky',
      message: 'boom',
      dryRun: '0',
    });
    expect(done.status).toBe(303);
    const location = done.headers.get('location') ?? '';
    expect(location).toBe('/deadletter?done=deleted&n=3&running=1');
    const notice = await (await dashboard.fetch(new Request(`http://localhost${location}`))).text();
    expect(notice).toContain(
      'Deleted 3 job(s). 1 of them were running: cancel requested — each is removed when its worker stops it.',
    );
    expect((await store.getJob(first.id))?.cancelRequested).toBe(true);
    expect(await store.bulk.countJobs({})).toBe(1);
  });

  it('a store that cannot cancel gets no Delete button for a running job, and the action is refused', async () => {
    const store = new MemoryJobStore();
    const engine = new JobEngine({ store, logger: silentLogger });
    await engine.enqueue('busy', {});
    const job = await runOne(store, 'busy');
    // A waiting job's page carries forms, hence a CSRF token (the running job's page has none).
    const waiting = await engine.enqueue('later', {}, { runAt: new Date(Date.now() + 3_600_000) });
    const cannotCancel = withMethods(store, {
      cancellation: undefined,
    });
    const dashboard = createDashboard({
      store: cannotCancel,
      authorize: () => true,
      logger: silentLogger,
    });
    const view = await (
      await dashboard.fetch(new Request(`http://localhost/jobs/${job.id}`))
    ).text();
    expect(view).not.toContain('/delete"');
    expect(view).not.toContain('>Cancel<');
    const refused = await submit(dashboard, `/jobs/${waiting.id}`, `/jobs/${job.id}/delete`, {});
    expect(refused.status).toBe(409);
    expect(await refused.text()).toContain('this store cannot cancel a running job');
    expect((await store.getJob(job.id))?.state).toBe('running');
  });
});

/** `n` dead-letter jobs of `type` failing with `message`, put there as a worker would. */
async function deadLetters(store: MemoryJobStore, type: string, n: number, message: string) {
  const client = new JobEngine({ store, logger: silentLogger });
  await client.enqueueMany(Array.from({ length: n }, (_, i) => ({ type, payload: { i } })));
  const jobs = await store.acquire({
    owner: 'worker-1',
    limit: n,
    leaseMs: 60_000,
    types: [type],
    queues: null,
    tenants: null,
  });
  await store.fail(
    jobs.map((job) => ({
      id: job.id,
      token: job.lockToken as string,
      error: { message, stack: null },
      deadletter: true,
      retryDelayMs: 0,
    })),
  );
}

/** The text of the dry-run count a bulk form's first step shows. */
async function dryRun(
  dashboard: ReturnType<typeof createDashboard>,
  fields: Record<string, string>,
): Promise<string> {
  const response = await submit(dashboard, '/deadletter', '/deadletter/bulk', {
    ...fields,
    dryRun: '1',
  });
  expect(response.status).toBe(200);
  return /class="dry-run-count">([^<]*)</.exec(await response.text())?.[1] ?? '';
}

describe('actions go through the admin API', () => {
  it('bulk retry and delete of a whole type use its batches and its default retries', async () => {
    const store = new MemoryJobStore();
    await deadLetters(store, 'mail', 3, 'smtp down');
    await deadLetters(store, 'sms', 2, 'no credit');
    const calls: { retries?: number; limit: number }[] = [];
    const watched = withMethods(store, {
      bulk: {
        ...store.bulk,
        retryDeadletterMany: (filter: JobFilter, retries: number, limit: number) => {
          calls.push({ retries, limit });
          return store.bulk.retryDeadletterMany(filter, retries, limit);
        },
        deleteMany: (filter: JobFilter, limit: number) => {
          calls.push({ limit });
          return store.bulk.deleteMany(filter, limit);
        },
      },
    });
    const dashboard = createDashboard({
      store: watched,
      authorize: () => true,
      logger: silentLogger,
    });
    expect(await dryRun(dashboard, { op: 'retry', type: 'mail' })).toBe('3');
    expect(calls).toEqual([]); // a dry run only counts
    const retried = await submit(dashboard, '/deadletter', '/deadletter/bulk', {
      op: 'retry',
      type: 'mail',
      dryRun: '0',
    });
    expect(retried.headers.get('location')).toBe('/deadletter?done=retried&n=3');
    expect(calls).toEqual([{ retries: DEFAULT_RETRIES, limit: BULK_BATCH }]);
    const mail = await store.listJobs({ type: 'mail', limit: 10, offset: 0 });
    expect(mail.map((job) => [job.state, job.retriesLeft])).toEqual(
      Array(3).fill(['async', DEFAULT_RETRIES]),
    );
    expect(await dryRun(dashboard, { op: 'delete', type: 'sms' })).toBe('2');
    const deleted = await submit(dashboard, '/deadletter', '/deadletter/bulk', {
      op: 'delete',
      type: 'sms',
      dryRun: '0',
    });
    expect(deleted.headers.get('location')).toBe('/deadletter?done=deleted&n=2');
    expect(calls[1]).toEqual({ limit: BULK_BATCH });
    // Only the dead-letter jobs of that type: the retried mail jobs stay.
    expect(await store.bulk.countJobs({})).toBe(3);
  });

  it('on a store without bulk calls or counts, the admin API acts one by one', async () => {
    const store = new MemoryJobStore();
    await deadLetters(store, 'mail', 4, 'smtp down');
    const plain = withMethods(store, {
      bulk: undefined,
    });
    const dashboard = createDashboard({
      store: plain,
      authorize: () => true,
      logger: silentLogger,
    });
    expect(await dryRun(dashboard, { op: 'delete', type: 'mail' })).toBe('4');
    const [first] = await store.listJobs({ state: 'deadletter', limit: 1, offset: 0 });
    await store.retryDeadletter((first as Job).id, 1); // no longer dead: not touched
    const deleted = await submit(dashboard, '/deadletter', '/deadletter/bulk', {
      op: 'delete',
      type: 'mail',
      dryRun: '0',
    });
    expect(deleted.headers.get('location')).toBe('/deadletter?done=deleted&n=3');
    expect((await store.listJobs({ limit: 10, offset: 0 })).map((job) => job.id)).toEqual([
      (first as Job).id,
    ]);
  });

  it('a job retried from its page gets the default retries; one that is no longer dead gets no notice', async () => {
    const store = new MemoryJobStore();
    await deadLetters(store, 'mail', 1, 'smtp down');
    const [job] = await store.listJobs({ limit: 1, offset: 0 });
    const id = (job as Job).id;
    const dashboard = createDashboard({ store, authorize: () => true, logger: silentLogger });
    const done = await submit(dashboard, `/jobs/${id}`, `/jobs/${id}/retry`, {});
    expect(done.headers.get('location')).toBe(`/jobs/${id}?done=retried&n=1`);
    expect(await store.getJob(id)).toMatchObject({ state: 'async', retriesLeft: DEFAULT_RETRIES });
    // Sent again from the stale page: the job is waiting now, and is not retried twice.
    const again = await submit(dashboard, `/jobs/${id}`, `/jobs/${id}/retry`, {});
    expect(again.headers.get('location')).toBe(`/jobs/${id}?n=1`);
  });

  it('cancelling a job that finished meanwhile does not say it was cancelled', async () => {
    const store = new MemoryJobStore();
    // An engine keeps every finished job in history by default.
    const client = new JobEngine({ store, logger: silentLogger });
    const { id } = await client.enqueue('work', {});
    const running = await runOne(store, 'work');
    // Its handler returns between the page's read and the cancel.
    const racing = withMethods(store, {
      cancellation: {
        ...store.cancellation,
        cancel: async (jobId: string) => {
          await store.complete([
            { id: running.id, token: running.lockToken as string, resultJson: '1' },
          ]);
          return store.cancellation.cancel(jobId);
        },
      },
    });
    const dashboard = createDashboard({
      store: racing,
      authorize: () => true,
      logger: silentLogger,
    });
    const done = await submit(dashboard, `/jobs/${id}`, `/jobs/${id}/cancel`, {});
    expect(done.headers.get('location')).toBe(`/jobs/${id}`);
    expect((await store.history.get(id))?.outcome).toBe('completed');
  });
});

describe('@jobs/dashboard/text', () => {
  it('duration gives the largest unit and the next when it is not 0', () => {
    expect(
      [850, 45_000, 192_000, 3_725_000, 3_605_000, 90_000_000, -192_000].map(duration),
    ).toEqual(['850ms', '45s', '3m 12s', '1h 2m', '1h', '1d 1h', '3m 12s']);
  });

  it('relativeText says in, ago, or now within a second', () => {
    const now = Date.UTC(2026, 10, 24);
    expect(relativeText(new Date(now + 303_000), now)).toBe('in 5m 3s');
    expect(relativeText(new Date(now - 192_000), now)).toBe('3m 12s ago');
    expect(relativeText(new Date(now + 999), now)).toBe('now');
  });

  it('inZone gives the wall-clock time in a zone, labelled with its name or its offset', () => {
    const at = new Date('2026-01-15T02:00:00Z');
    expect(inZone(at, 'Europe/Berlin')).toBe('2026-01-15 03:00:00 Europe/Berlin');
    expect(inZone(at, 'Europe/Berlin', 'offset')).toBe('2026-01-15 03:00:00 GMT+1');
    expect(inZone(new Date('2026-07-15T02:00:00Z'), 'Europe/Berlin', 'offset')).toBe(
      '2026-07-15 04:00:00 GMT+2',
    );
    expect(inZone(at, 'America/New_York')).toBe('2026-01-14 21:00:00 America/New_York');
    expect(() => inZone(at, 'Not/AZone')).toThrow(RangeError);
  });

  it('scopeLimitText reads exclusive for a limit of 1, limit N above, null without', () => {
    const jobs = [
      { exclusive: false, scopeLimit: 2 },
      { exclusive: true, scopeLimit: 1 },
      { exclusive: true }, // a store written before scope limits
      { exclusive: false, scopeLimit: null },
    ];
    expect(jobs.map(scopeLimitText)).toEqual(['limit 2', 'exclusive', 'exclusive', null]);
    expect(jobs.map(scopeLimitOf)).toEqual([2, 1, 1, null]);
  });

  it('jobWait reads a parked job from its last step: a sleep, a signal by name; nothing else', () => {
    const now = Date.UTC(2026, 10, 28, 9);
    const step = (name: string, result: unknown) => ({ name, result });
    const charge = step('charge', { id: 'ch_1' });
    const timer = (...steps: { name: string; result: unknown }[]) => ({ state: 'timer', steps });
    expect(jobWait(timer(charge, step('nap', { $sleepUntil: now + 5 })), now)).toEqual({
      kind: 'sleep',
      step: 'nap',
      until: new Date(now + 5),
    });
    expect(jobWait(timer(step('approval#2', { $waitUntil: now + 5, $key: 'o 1' })), now)).toEqual({
      kind: 'signal',
      step: 'approval#2',
      signal: 'approval',
      key: 'o 1',
      until: new Date(now + 5),
    });
    // Checkpointed before waits recorded their key.
    expect(jobWait(timer(step('approval', { $waitUntil: now + 5 })), now)).toMatchObject({
      key: null,
    });
    expect(shellWord('o-1')).toBe('o-1');
    expect(shellWord("it's a key")).toBe(`'it'\\''s a key'`);
    const nothing = [
      timer(step('nap', { $sleepUntil: now })), // its time came: due
      timer(step('nap', { $sleepUntil: now + 5 }), charge), // woke and went on
      timer(step('approval', { $signal: { ok: true } })), // the signal was taken
      { state: 'async', steps: [step('approval', { $waitUntil: now + 5 })] }, // signalled: due
      timer(charge),
      timer(step('raw', 42)),
      timer(),
      { state: 'timer' }, // a store without steps
    ];
    expect(nothing.map((job) => jobWait(job, now))).toEqual(nothing.map(() => null));
  });
});

describe('flows', () => {
  it('layersOf puts a node one layer right of its deepest parent', () => {
    const node = (name: string, dependsOn: string[] = []) =>
      ({ name, type: 't', dependsOn, after: 'completed', jobId: null, state: 'pending' }) as const;
    const layers = layersOf([
      node('a'),
      node('b', ['a']),
      node('c', ['a']),
      node('d', ['b', 'c']),
      node('e', ['a', 'd']),
      node('lone'),
    ]);
    expect(Object.fromEntries(layers)).toEqual({ a: 0, b: 1, c: 1, d: 2, e: 3, lone: 0 });
  });

  it('flowCounts reads a live flow from its checkpoints and a finished one from its summary', () => {
    const payload = { flow: 1, nodes: ['a', 'b', 'c', 'd', 'e'].map((name) => ({ name })) };
    const step = (name: string, result: unknown) => ({
      name,
      result,
      at: new Date(),
      durationMs: 0,
    });
    const live = {
      state: 'timer',
      payload,
      steps: [
        step('node:a', { $child: '1', outcome: 'completed', result: 1 }),
        step('node:b', { $child: '2' }),
        step('node:c', { $child: '3', outcome: 'cancelled' }),
      ],
    } as unknown as Job;
    expect(flowCounts(live)).toEqual({
      nodes: 5,
      pending: 2,
      started: 1,
      completed: 1,
      deadletter: 0,
      cancelled: 1,
      skipped: 0,
    });
    const finished = {
      state: 'finished',
      outcome: 'completed',
      payload,
      steps: [],
      result: {
        status: 'failed',
        nodes: { a: 'completed', b: 'deadletter', c: 'cancelled', d: 'skipped', e: 'skipped' },
      },
    } as unknown as Job;
    expect(flowCounts(finished)).toEqual({
      nodes: 5,
      pending: 0,
      started: 0,
      completed: 1,
      deadletter: 1,
      cancelled: 1,
      skipped: 2,
    });
  });
});
