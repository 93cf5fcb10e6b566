/** The dashboard on the reference store, and the parts that need no browser. */
import {
  JobEngine,
  type JobFilter,
  type ListJobsRequest,
  MemoryJobStore,
  silentLogger,
} from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { escapeHtml } from '../src/html.js';
import { createDashboard } from '../src/index.js';
import { readJobsPage, SlowReadCache, scanJobs } from '../src/reads.js';
import { duration, inZone, relativeText, scopeLimitOf, scopeLimitText } from '../src/text.js';

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
        const page = await readJobsPage(s, {}, position, 50);
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
      const { jobs } = await scanJobs(s, { key: 'five' }, 100);
      expect(jobs.map((job) => (job.payload as { i: number }).i)).toEqual([5]);
    }
  });

  it('countJobs stops at its cap', async () => {
    const store = await storeWithJobs(30);
    expect(await store.countJobs({}, 10)).toBe(10);
    expect(await store.countJobs({ type: 'odd' })).toBe(15);
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
      const response = await dashboard.fetch(new Request(`http://app.test${path}`));
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    }
    expect((await dashboard.fetch(new Request('http://app.test/jobs/999'))).status).toBe(404);
    const stats = (await (
      await dashboard.fetch(new Request('http://app.test/api/stats'))
    ).json()) as {
      groups: { type: string; state: string; count: number }[];
    };
    expect(stats.groups.reduce((sum, g) => sum + g.count, 0)).toBe(5);
    const jobs = await dashboard.fetch(new Request('http://app.test/api/jobs?type=odd'));
    expect(jobs.headers.get('content-type')).toContain('application/json');
    expect(await jobs.json()).toMatchObject({ total: 2, totalCapped: false, next: null });
    expect(
      await (await dashboard.fetch(new Request('http://app.test/api/jobs/1'))).json(),
    ).toMatchObject({ id: '1', type: 'even' });
    expect((await dashboard.fetch(new Request('http://app.test/api/jobs/999'))).status).toBe(404);
    expect((await dashboard.fetch(new Request('http://app.test/api/nothing'))).status).toBe(404);
    expect((await dashboard.fetch(new Request('http://app.test/nowhere'))).status).toBe(404);
    expect(
      (await dashboard.fetch(new Request('http://app.test/jobs', { method: 'PUT' }))).status,
    ).toBe(405);
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
});
