/**
 * The dashboard in a real browser against a real store with a real engine running jobs. Each
 * store's test file calls `dashboardSuite(backend)`.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { type Job, JobEngine, type JobStore, silentLogger, UnrecoverableError } from '@jobs/core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDashboard } from '../src/index.js';
import type { Backend } from './backends.js';
import { ARTIFACTS, launchBrowser } from './browser.js';

const BASE = '/ops/jobs';
const PAGED = 1_050;
const HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';

async function until<T>(
  what: string,
  read: () => Promise<T | null | undefined | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Signed in as an admin: the app's cookie that `authorize` checks. */
const isAdmin = (req: unknown): boolean =>
  /(?:^|;\s*)user=admin(?:;|$)/.test(String((req as IncomingMessage).headers?.cookie ?? ''));

export function dashboardSuite(open: () => Promise<Backend | null>): void {
  let backend: Backend | null = null;
  let store: JobStore;
  let engine: JobEngine;
  let server: Server;
  let origin = '';
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const broken = { fragile: true, bulk: true };
  const ids: Record<string, string> = {};
  const errors: unknown[] = [];
  const dialogs: string[] = [];

  const shot = async (name: string): Promise<void> => {
    await page.screenshot({
      path: join(ARTIFACTS, `${backend?.name}-${name}.png`),
      fullPage: true,
    });
  };
  const visit = async (path: string): Promise<void> => {
    const response = await page.goto(`${origin}${BASE}${path}`);
    expect(response?.status(), path).toBe(200);
  };

  beforeAll(async () => {
    backend = await open();
    if (!backend) return;
    store = await backend.open();
    engine = new JobEngine({
      store,
      concurrency: 4,
      leaseMs: 5_000,
      pollIntervalMs: 200,
      logger: silentLogger,
      handlers: {
        quick: async (job) => ({ doubled: (job.payload as { n: number }).n * 2 }),
        fragile: async () => {
          if (broken.fragile) throw new UnrecoverableError('upstream said no');
          return { ok: true };
        },
        'bulk-dead': async (job) => {
          if (broken.bulk)
            throw new UnrecoverableError(`boom ${(job.payload as { group: number }).group}`);
          return { ok: true };
        },
        hostile: async () => {
          throw new UnrecoverableError(HOSTILE);
        },
        report: async () => ({ rows: 1 }),
        // Parked until the test signals it (or an hour passes).
        'await-approval': async (_job, ctx) => {
          await ctx.step('charge', async () => ({ id: 'ch_1' }));
          return ctx.waitFor('approval', { key: 'o-1', timeoutMs: 3_600_000 });
        },
        'cool-off': async (_job, ctx) => ctx.sleep('cool-off', 3_600_000),
        'flow-fail': async () => {
          throw new UnrecoverableError('no stock');
        },
        // Two children in parallel, then parked (a finished parent would leave the live table).
        'ship-two': async (_job, ctx) => {
          await Promise.all([
            ctx.run('label-a', 'quick', { n: 1 }),
            ctx.run('label-b', 'quick', { n: 2 }),
          ]);
          return ctx.sleep('hold', 3_600_000);
        },
        // Runs until cancelled, reporting progress.
        long: async (_job, ctx) => {
          ctx.progress({ done: 3, total: 10 });
          await new Promise((resolve) =>
            ctx.signal.addEventListener('abort', resolve, { once: true }),
          );
          throw ctx.signal.reason ?? new Error('aborted');
        },
      },
    });
    await engine.start();

    const dashboard = createDashboard({
      store,
      basePath: BASE,
      authorize: isAdmin,
      logger: silentLogger,
    });
    const mounted = createDashboard({ store, authorize: isAdmin, logger: silentLogger });
    // Counts exactly up to 100 live jobs: the suite's 1,000+ make it a "big" table.
    const small = createDashboard({
      store,
      basePath: '/small',
      countLimit: 100,
      logger: silentLogger,
    });
    server = createServer((req, res) => {
      const notFound = (): void => {
        res.statusCode = 404;
        res.end('app 404');
      };
      if (req.url?.startsWith('/express/')) {
        // What Express's app.use('/express', handler) does to the request.
        Object.assign(req, {
          baseUrl: '/express',
          originalUrl: req.url,
          url: req.url.slice('/express'.length),
        });
        mounted.handler(req, res, notFound);
        return;
      }
      if (req.url?.startsWith('/small/')) {
        small.handler(req, res, notFound);
        return;
      }
      dashboard.handler(req, res, notFound);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    // Jobs to page through: due tomorrow, so nothing runs them.
    const tomorrow = new Date(Date.now() + 86_400_000);
    for (let i = 0; i < PAGED; i += 350) {
      await engine.enqueueMany(
        Array.from({ length: Math.min(350, PAGED - i) }, (_, k) => ({
          type: 'page-me',
          payload: { i: i + k },
          options: { runAt: tomorrow, queue: 'bulk', ...(i + k === 7 ? { key: 'unique-7' } : {}) },
        })),
      );
    }
    await engine.enqueueMany(
      Array.from({ length: 12 }, (_, n) => ({ type: 'quick', payload: { n } })),
    );
    ids.fragile = (await engine.enqueue('fragile', { order: 42 })).id;
    ids.hostile = (await engine.enqueue('hostile', { note: HOSTILE })).id;
    // Long unbroken values: they wrap inside their cells instead of widening the page.
    ids.long = (
      await engine.enqueue(
        `reconcile-${'ledger'.repeat(20)}`,
        { line: 'x'.repeat(600), nested: { list: Array.from({ length: 30 }, (_, i) => i) } },
        {
          runAt: tomorrow,
          queue: `q-${'z'.repeat(80)}`,
          scope: `acct-${'9'.repeat(150)}`,
          key: `k-${'y'.repeat(150)}`,
          tenantId: `t-${'w'.repeat(60)}`,
        },
      )
    ).id;
    const bulk = await engine.enqueueMany(
      [1, 1, 1, 2, 2].map((group) => ({ type: 'bulk-dead', payload: { group } })),
    );
    ids.bulk1 = bulk[0]?.id ?? '';
    await engine.schedule('nightly-report', {
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      type: 'report',
    });
    await until(
      'the dead-letter jobs',
      async () => (await store.bulk?.countJobs({ state: 'deadletter' })) === 7,
    );
    await until(
      'the quick jobs',
      async () => (await store.bulk?.countJobs({ type: 'quick' })) === 0,
    );

    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addCookies([{ name: 'user', value: 'admin', url: origin }]);
    page = await context.newPage();
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    page.on('pageerror', (error) => errors.push(error));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    server?.close();
    await engine?.stop({ timeoutMs: 5_000 });
    await store?.close();
    await backend?.drop();
  });

  it('renders every page (screenshots in test-artifacts/)', async (t) => {
    if (!backend) return t.skip();
    await visit('/');
    await expect(page.locator('h1').first().textContent()).resolves.toBe('Overview');
    expect(await page.locator('svg.chart').count()).toBe(1);
    expect(await page.content()).toContain('page-me');
    await shot('overview');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('overview-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await visit('/jobs');
    await shot('jobs');
    await visit(`/jobs/${ids.fragile}`);
    expect(await page.locator('h1').textContent()).toContain('deadletter');
    expect(await page.content()).toContain('upstream said no');
    await shot('job');
    await visit(`/jobs/${ids.long}`);
    await shot('job-long-values');
    await visit(`/jobs?scope=acct-${'9'.repeat(150)}`);
    expect(await page.locator('tbody tr').count()).toBe(1);
    await shot('jobs-long-values');
    // No card scrolls sideways: long values wrap in their cells.
    const fits = (): Promise<unknown> =>
      page.evaluate(
        `document.documentElement.scrollWidth <= window.innerWidth &&
          [...document.querySelectorAll('.card')].every((c) => c.scrollWidth <= c.clientWidth)`,
      );
    expect(await fits()).toBe(true);
    await visit(`/jobs/${ids.long}`);
    expect(await fits()).toBe(true);
    await visit('/');
    expect(await fits()).toBe(true);
    await visit('/deadletter');
    expect(await page.locator('tbody tr').count()).toBe(4); // fragile, hostile, boom 1, boom 2
    await shot('deadletter');
    await visit('/schedules');
    await shot('schedules');
    await visit('/history');
    expect(await page.locator('tbody tr').count()).toBeGreaterThanOrEqual(12);
    await shot('history');
    expect(errors).toEqual([]);
  });

  it('shows a scope with its limit on the job page and in the jobs list', async (t) => {
    if (!backend) return t.skip();
    // Due tomorrow and of a type no handler runs: they wait while the test reads them.
    const later = { runAt: new Date(Date.now() + 86_400_000) };
    const made = {
      limited: await engine.enqueue(
        'scoped',
        {},
        { ...later, scope: 'customer-42', scopeLimit: 2 },
      ),
      exclusive: await engine.enqueue(
        'scoped',
        {},
        { ...later, scope: 'customer-42', exclusive: true },
      ),
      unlimited: await engine.enqueue('scoped', {}, { ...later, scope: 'customer-7' }),
    };
    try {
      const scopeOnPage = async (id: string): Promise<string | null> => {
        await visit(`/jobs/${id}`);
        return page.locator('dt:text-is("Scope") + dd').textContent();
      };
      expect(await scopeOnPage(made.limited.id)).toBe('customer-42 (limit 2)');
      expect(await page.locator('.scope-limit').getAttribute('title')).toBe(
        'at most 2 jobs of this scope run at once',
      );
      await shot('job-scope-limit');
      expect(await scopeOnPage(made.exclusive.id)).toBe('customer-42 (exclusive)');
      expect(await page.locator('.scope-limit').getAttribute('title')).toBe(
        'one job of this scope runs at a time',
      );
      expect(await scopeOnPage(made.unlimited.id)).toBe('customer-7');
      expect(await page.locator('.scope-limit').count()).toBe(0);

      await visit('/jobs?type=scoped');
      const rows = await page
        .locator('tbody tr')
        .evaluateAll((trs) =>
          trs.map((tr) => [tr.children[0]?.textContent?.trim(), tr.children[4]?.textContent]),
        );
      expect(Object.fromEntries(rows)).toEqual({
        [made.limited.id]: 'customer-42 (limit 2)',
        [made.exclusive.id]: 'customer-42 (exclusive)',
        [made.unlimited.id]: 'customer-7',
      });
      expect(errors).toEqual([]);
    } finally {
      for (const job of Object.values(made)) await store.deleteJob(job.id);
    }
  });

  it('shows what a parked job waits for: on its page (timeline and a card) and in the jobs list', async (t) => {
    if (!backend) return t.skip();
    const waiting = await engine.enqueue('await-approval', {});
    const sleeping = await engine.enqueue('cool-off', {});
    const parked = (id: string) =>
      until(`job ${id} parked`, async () => {
        const job = await store.getJob(id);
        return job?.state === 'timer' && (job.steps?.length ?? 0) > 0;
      });
    await parked(waiting.id);
    await parked(sleeping.id);
    try {
      await visit(`/jobs/${waiting.id}`);
      await expect(
        page.locator('.timeline li').last().locator('div').first().textContent(),
      ).resolves.toBe('waiting for signal approval (ctx.waitFor approval) or its timeout');
      const card = page.locator('.card', {
        has: page.locator('h2:text-is("Waiting for a signal")'),
      });
      await expect(card.locator('dt:text-is("Signal") + dd').textContent()).resolves.toBe(
        'approval',
      );
      await expect(
        card.locator('dt:text-is("Times out") + dd time').textContent(),
      ).resolves.toMatch(/^in /);
      await expect(card.locator('code').last().textContent()).resolves.toBe('engine.signal(…)');
      await shot('job-waiting');
      await visit(`/jobs/${sleeping.id}`);
      await expect(
        page.locator('.timeline li').last().locator('div').first().textContent(),
      ).resolves.toBe('sleeping (ctx.sleep cool-off) until its wake time');
      const nap = page.locator('.card', { has: page.locator('h2:text-is("Sleeping")') });
      await expect(nap.locator('dt:text-is("Wakes") + dd time').textContent()).resolves.toMatch(
        /^in /,
      );

      await visit('/jobs?state=timer&type=await-approval');
      await expect(page.locator('tbody tr td:nth-child(3) .wait').textContent()).resolves.toMatch(
        /^waits for signal approval · times out in /,
      );
      await visit('/jobs?state=timer&type=cool-off');
      await expect(page.locator('tbody tr td:nth-child(3) .wait').textContent()).resolves.toMatch(
        /^sleeps · wakes in /,
      );
      await shot('jobs-waiting');
      expect(errors).toEqual([]);
    } finally {
      for (const job of [waiting, sleeping]) await store.deleteJob(job.id);
    }
  });

  it("shows a parent's children, a flow as a graph (on its page and its nodes'), and the flows page", async (t) => {
    if (!backend) return t.skip();
    const parent = await engine.enqueue('ship-two', {});
    // a → b (sleeps an hour: the flow stays live), a → c (dead-letters) → d (skipped), a, b → e.
    const flow = await engine.flow({
      nodes: {
        a: { type: 'quick', payload: { n: 1 } },
        b: { type: 'cool-off', dependsOn: ['a'] },
        c: { type: 'flow-fail', dependsOn: ['a'] },
        d: { type: 'quick', payload: { n: 4 }, dependsOn: ['c'] },
        e: { type: 'quick', payload: { n: 5 }, dependsOn: ['a', 'b'] },
      },
    });
    try {
      await until('the parent parked after its children', async () => {
        const job = await store.getJob(parent.id);
        return job?.state === 'timer' && job.steps?.some((step) => step.name === 'hold');
      });
      await visit(`/jobs/${parent.id}`);
      const children = page.locator('.card', { has: page.locator('h2:has-text("Children")') });
      await expect(children.locator('tbody tr').count()).resolves.toBe(2);
      await expect(children.locator('tbody tr td:first-child').allTextContents()).resolves.toEqual([
        'label-a',
        'label-b',
      ]);
      await expect(children.locator('tbody .badge').allTextContents()).resolves.toEqual([
        'completed',
        'completed',
      ]);

      const view = await until('the flow settled', async () => {
        const read = await engine.admin.getFlow(flow.id);
        const state = (name: string) => read?.nodes.find((node) => node.name === name)?.state;
        return state('b') === 'timer' && state('c') === 'deadletter' ? read : null;
      });
      await visit(`/jobs/${flow.id}`);
      const graph = page.locator('#flow-graph svg.flow-graph');
      await expect(graph.locator('g.node').count()).resolves.toBe(5);
      await expect(graph.locator('g.node.completed').count()).resolves.toBe(1);
      await expect(graph.locator('g.node.deadletter').count()).resolves.toBe(1);
      await expect(graph.locator('g.node.skipped').count()).resolves.toBe(1);
      await expect(graph.locator('g.node.waiting').count()).resolves.toBe(2);
      await expect(graph.locator('path.edge').count()).resolves.toBe(5);
      await shot('flow-graph');
      // A started node's box links to its job, whose page shows the same graph, its box outlined.
      const b = view.nodes.find((node) => node.name === 'b');
      await graph.locator('a:has(g[data-node="b"])').click();
      await page.waitForURL(`**/jobs/${b?.jobId}`);
      await expect(page.locator('#flow-graph g.node').count()).resolves.toBe(5);
      await expect(
        page.locator('#flow-graph g.node.current').getAttribute('data-node'),
      ).resolves.toBe('b');

      await visit('/flows');
      await expect(page.locator('nav.tabs a.active').textContent()).resolves.toBe('Flows');
      const row = page.locator(`#live-flows tr[data-flow="${flow.id}"]`);
      await expect(row.locator('td:nth-child(3)').textContent()).resolves.toBe('5');
      await expect(row.locator('.flow-count').allTextContents()).resolves.toEqual([
        '1 completed',
        '2 started',
        '2 pending',
      ]);
      await shot('flows');
      // A finished flow is listed from history, with its outcome counts from its summary.
      const done = await engine.flow({ nodes: { only: { type: 'quick', payload: { n: 3 } } } });
      await engine.result(done.id, { timeoutMs: 15_000 });
      await visit('/flows');
      const finished = page.locator(`#finished-flows tr[data-flow="${done.id}"]`);
      await expect(finished.locator('.badge').textContent()).resolves.toBe('completed');
      await expect(finished.locator('.flow-count').allTextContents()).resolves.toEqual([
        '1 completed',
      ]);
      const list = (await (await fetch(`${origin}${BASE}/api/flows`)).json()) as {
        live: { id: string; status: string }[];
      };
      expect(list.live.find((f) => f.id === flow.id)?.status).toBe('running');
      const one = await fetch(`${origin}${BASE}/api/flows/${flow.id}`);
      expect(((await one.json()) as { nodes: unknown[] }).nodes).toHaveLength(5);
      expect((await fetch(`${origin}${BASE}/api/flows/${parent.id}`)).status).toBe(404);
      expect(errors).toEqual([]);
    } finally {
      await engine.admin.cancelFlow(flow.id);
      await engine.admin.cancel(parent.id);
    }
  });

  it('says when the overview is approximate: the newest jobs counted up to the limit', async (t) => {
    if (!backend) return t.skip();
    // The default limit (20,000) counts every job here: nothing approximate.
    await visit('/');
    expect(await page.locator('.notice.approx').count()).toBe(0);
    expect(await page.content()).not.toContain('≈');

    const overview = async (): Promise<{ notice: string; live: string; counted: number }> => {
      const response = await page.goto(`${origin}/small/`);
      expect(response?.status()).toBe(200);
      const all = page.locator('table').first().locator('tr', { hasText: 'All' });
      const cells = await all.locator('td.num').allTextContents();
      // The state columns of the "All" row (then Due): they add up to the 100 counted.
      const counted = cells
        .slice(0, 5)
        .reduce((sum, text) => sum + Number(text.replace(/\D/g, '') || 0), 0);
      return {
        notice: (await page.locator('.notice.approx').textContent()) ?? '',
        live: (await page.locator('.stat .value').first().textContent()) ?? '',
        counted,
      };
    };
    let shown = await overview();
    expect(shown.notice).toContain('Approximate counts');
    expect(shown.notice).toContain('counted up to 100 jobs');
    expect(shown.counted).toBe(100);
    if (backend.analyze) {
      // With statistics, the total is the database's estimate.
      await backend.analyze();
      shown = await overview();
      expect(shown.live).toMatch(/^≈\d{1,3}(,\d{3})*$/);
      expect(Number(shown.live.replace(/\D/g, ''))).toBeGreaterThan(500);
      expect(shown.notice).toContain('the database’s estimate');
    } else {
      // SQLite keeps no estimate: the total says how far it was counted.
      expect(shown.live).toBe('100+');
    }
    expect(await page.locator('.stat .value').nth(4).textContent()).toMatch(/^≥\d+$/);
    await shot('overview-approximate');
    const stats = (await (await fetch(`${origin}/small/api/stats`)).json()) as {
      bounded: { newest: number; estimate: number | null } | null;
    };
    expect(stats.bounded?.newest).toBe(100);
    expect(errors).toEqual([]);
  });

  it('filters jobs and pages through 1,050 of them', async (t) => {
    if (!backend) return t.skip();
    await visit('/jobs');
    await page.fill('input[name=type]', 'page-me');
    await page.selectOption('select[name=state]', 'timer');
    await page.click('form.filters button[type=submit]');
    await expect(page.locator('.count-pill').textContent()).resolves.toBe('1,050');
    const seen = new Set<string>();
    let pages = 0;
    for (;;) {
      pages += 1;
      for (const id of await page.locator('tbody td.mono a').allTextContents()) seen.add(id);
      const next = page.locator('a[rel=next]');
      if ((await next.count()) === 0) break;
      await next.click();
    }
    expect(seen.size).toBe(PAGED);
    expect(await page.content()).not.toContain('offset paging'); // the SQL store pages by id
    expect(await store.bulk?.countJobs({ type: 'page-me' }, 100)).toBe(100);
    expect(pages).toBe(Math.ceil(PAGED / 50));
    await page.fill('input[name=key]', 'unique-7');
    await page.click('form.filters button[type=submit]');
    expect(await page.locator('tbody tr').count()).toBe(1);
    await visit('/jobs?state=deadletter');
    expect(await page.locator('tbody tr').count()).toBe(7);

    // The JSON API pages the same way.
    const apiIds = new Set<string>();
    let query = 'type=page-me&state=timer';
    for (;;) {
      const body = (await (await fetch(`${origin}${BASE}/api/jobs?${query}`)).json()) as {
        jobs: { id: string }[];
        next: { after: string; offset: number } | null;
        total: number;
      };
      expect(body.total).toBe(PAGED);
      for (const job of body.jobs) apiIds.add(job.id);
      if (!body.next) break;
      query = `type=page-me&state=timer&after=${body.next.after}&offset=${body.next.offset}`;
    }
    expect([...apiIds].sort()).toEqual([...seen].sort());
  });

  it('retries a dead-letter job from its page, and the engine runs it', async (t) => {
    if (!backend) return t.skip();
    broken.fragile = false;
    await visit(`/jobs/${ids.fragile}`);
    await page.click('button:has-text("Retry now")');
    await page.waitForURL(/done=retried/);
    await until(
      'the retried job to complete',
      async () => (await store.history?.get(ids.fragile ?? ''))?.outcome === 'completed',
    );
    await visit(`/jobs/${ids.fragile}`);
    expect(await page.locator('h1 .badge').first().textContent()).toBe('completed');
    expect(await page.locator('pre').allTextContents()).toContain(
      JSON.stringify({ ok: true }, null, 2),
    );
  });

  it('bulk-retries one error group after a dry run that touches nothing', async (t) => {
    if (!backend) return t.skip();
    broken.bulk = false;
    await visit('/deadletter');
    await page.locator('tr', { hasText: 'boom 1' }).locator('button:has-text("Retry…")').click();
    await expect(page.locator('.dry-run-count').textContent()).resolves.toBe('3');
    expect(await store.bulk?.countJobs({ state: 'deadletter', type: 'bulk-dead' })).toBe(5);
    await shot('deadletter-dry-run');
    await page.click('button:has-text("Retry 3 job(s) now")');
    await page.waitForURL(/done=retried/);
    expect(await page.locator('.notice.ok').textContent()).toContain('Retried 3');
    await until('the three retried jobs to complete', async () => {
      const left = await store.listJobs({ type: 'bulk-dead', limit: 10, offset: 0 });
      return left.length === 2 && left.every((job: Job) => job.lastError?.message === 'boom 2');
    });
  });

  it('pauses and resumes a schedule, showing fire times in its time zone', async (t) => {
    if (!backend) return t.skip();
    await visit('/schedules');
    const row = page.locator('tr', { hasText: 'nightly-report' });
    expect(await row.textContent()).toContain('03:00:00 Europe/Berlin');
    await row.locator('button:has-text("Pause")').click();
    await page.waitForURL(/done=paused/);
    expect((await store.getSchedule('nightly-report'))?.paused).toBe(true);
    expect(
      await page
        .locator('tr', { hasText: 'nightly-report' })
        .locator('.badge')
        .first()
        .textContent(),
    ).toBe('paused');
    await page
      .locator('tr', { hasText: 'nightly-report' })
      .locator('button:has-text("Resume")')
      .click();
    await page.waitForURL(/done=resumed/);
    expect((await store.getSchedule('nightly-report'))?.paused).toBe(false);
  });

  it('cancels a running job from its page, showing its progress first', async (t) => {
    if (!backend) return t.skip();
    const id = (await engine.enqueue('long', {})).id;
    await until('the job to report progress', async () => {
      const job = (await store.getJob(id)) as (Job & { progress?: unknown }) | null;
      return job?.state === 'running' && job.progress !== null && job.progress !== undefined;
    });
    await visit(`/jobs/${id}`);
    expect(await page.locator('progress').getAttribute('value')).toBe('3');
    await shot('job-running');
    await page.click('button:has-text("Cancel")');
    await page.waitForURL(/done=cancel/);
    await until(
      'the cancelled job to leave the table',
      async () => (await store.getJob(id)) === null,
    );
    expect((await store.history?.get(id))?.outcome).toBe('cancelled');
    await visit(`/jobs/${id}`);
    expect(await page.locator('h1 .badge').first().textContent()).toBe('cancelled');
  });

  it('deletes a running job from its page by requesting its cancel; it goes when its worker stops it', async (t) => {
    if (!backend) return t.skip();
    const id = (await engine.enqueue('long', {})).id;
    await until('the job to run', async () => (await store.getJob(id))?.state === 'running');
    await visit(`/jobs/${id}`);
    dialogs.length = 0;
    await page.click('button:has-text("Delete")');
    await page.waitForURL(/done=delete-requested/);
    expect(dialogs[0]).toContain(`Job ${id} is running`);
    expect(await page.locator('.notice.ok').textContent()).toBe(
      'Cancel requested — the job is running; it is removed when its worker stops it.',
    );
    // Not deleted under its worker: it ends cancelled once the worker lets go.
    await until('the job to leave the table', async () => (await store.getJob(id)) === null);
    expect((await store.history?.get(id))?.outcome).toBe('cancelled');
    expect(errors).toEqual([]);
  });

  it('refuses a page whose own name was pointed at this server (DNS rebinding): it reads nothing', async (t) => {
    if (!backend) return t.skip();
    // The browser resolves evil.example to 127.0.0.1 (browser.ts), as a rebinding attack makes it.
    const evil = `http://evil.example:${new URL(origin).port}`;
    const before = await store.stats();
    const response = await page.goto(`${evil}${BASE}/jobs?type=page-me`);
    expect(response?.status()).toBe(421);
    const text = (await page.textContent('body')) ?? '';
    expect(text).toContain('does not answer for the host "evil.example"');
    expect(text).toContain("allowedHosts: ['evil.example']");
    // The page's own script, same-origin as far as the browser knows, gets nothing either.
    const answers = await page.evaluate(async (base: string) => {
      const read = async (path: string, init?: RequestInit) => {
        const r = await fetch(`${base}${path}`, init);
        return { status: r.status, leaked: /page-me|_csrf/.test(await r.text()) };
      };
      return [
        await read('/api/jobs?type=page-me'),
        await read('/deadletter'),
        await read('/deadletter/bulk', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: 'op=delete&type=bulk-dead&dryRun=0',
        }),
      ];
    }, BASE);
    expect(answers).toEqual([
      { status: 421, leaked: false },
      { status: 421, leaked: false },
      { status: 421, leaked: false },
    ]);
    expect(await store.stats()).toEqual(before);
    // The same browser at the address the dashboard was opened on still reads it.
    await visit('/jobs?type=page-me');
  });

  it('answers malformed parameters with 400 (404 for an unknown asset), never 500', async (t) => {
    if (!backend) return t.skip();
    const before = await store.stats();
    const answers: Record<string, number> = {};
    for (const path of [
      '/?done=__proto__',
      '/history?cursor=999999999999999.1',
      '/jobs?type=%00',
      '/deadletter?type=%00',
      '/history?type=%00',
      '/api/jobs?scope=%00',
      '/jobs?state=__proto__',
      '/jobs?after=1&offset=0.5',
      '/jobs?key=%E0%A4%A',
      '/jobs/%00',
      '/assets/__proto__',
    ]) {
      answers[path] = (await fetch(`${origin}${BASE}${path}`)).status;
    }
    expect(answers).toEqual({
      '/?done=__proto__': 400,
      '/history?cursor=999999999999999.1': 400,
      '/jobs?type=%00': 400,
      '/deadletter?type=%00': 400,
      '/history?type=%00': 400,
      '/api/jobs?scope=%00': 400,
      '/jobs?state=__proto__': 400,
      '/jobs?after=1&offset=0.5': 400,
      '/jobs?key=%E0%A4%A': 400,
      '/jobs/%00': 400,
      '/assets/__proto__': 404,
    });
    expect(await store.stats()).toEqual(before);
  });

  it('shows a hostile payload and error as text', async (t) => {
    if (!backend) return t.skip();
    await visit(`/jobs/${ids.hostile}`);
    expect(await page.locator('pre.payload').textContent()).toContain(
      '<script>window.__pwned = 1</script>',
    );
    expect(await page.locator('p.err').textContent()).toBe(HOSTILE);
    await shot('job-hostile');
    const pwned = (): Promise<unknown> =>
      page.evaluate(() => (globalThis as { __pwned?: number }).__pwned);
    expect(await pwned()).toBeUndefined();
    await visit('/deadletter');
    expect(await page.content()).toContain('&lt;script&gt;');
    expect(await pwned()).toBeUndefined();
  });

  it('refuses actions without authorization, CSRF token or same origin (plain HTTP)', async (t) => {
    if (!backend) return t.skip();
    const target = `${origin}${BASE}/jobs/${ids.hostile}/delete`;
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    // A page view as the admin gives the CSRF cookie and the form token.
    const view = await fetch(`${origin}${BASE}/jobs/${ids.hostile}`, {
      headers: { cookie: 'user=admin' },
    });
    const csrfCookie = (view.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const token = /name="_csrf" value="([^"]+)"/.exec(await view.text())?.[1] ?? '';
    expect(csrfCookie).toMatch(/^jobs_dashboard_csrf=/);
    expect(token).not.toBe('');
    const post = (headers: Record<string, string>, body: string): Promise<Response> =>
      fetch(target, { method: 'POST', redirect: 'manual', headers: { ...form, ...headers }, body });

    expect((await post({ cookie: csrfCookie }, `_csrf=${token}`)).status).toBe(403); // not admin
    expect((await post({ cookie: 'user=admin' }, '')).status).toBe(403); // no token, no cookie
    expect((await post({ cookie: `user=admin; ${csrfCookie}` }, '')).status).toBe(403); // no token
    expect((await post({ cookie: `user=admin; ${csrfCookie}` }, `_csrf=${token}x`)).status).toBe(
      403,
    );
    expect(
      (
        await post(
          { cookie: `user=admin; jobs_dashboard_csrf=${'a'.repeat(24)}` },
          `_csrf=${token}`,
        )
      ).status,
    ).toBe(403);
    expect(
      (
        await post(
          { cookie: `user=admin; ${csrfCookie}`, origin: 'https://evil.example' },
          `_csrf=${token}`,
        )
      ).status,
    ).toBe(403);
    expect((await fetch(target, { method: 'GET', headers: { cookie: 'user=admin' } })).status).toBe(
      404,
    );
    expect(await store.getJob(ids.hostile ?? '')).not.toBeNull();
    // The same request with everything right does delete: the refusals above were the checks.
    const ok = await post({ cookie: `user=admin; ${csrfCookie}`, origin }, `_csrf=${token}`);
    expect(ok.status).toBe(303);
    expect(await store.getJob(ids.hostile ?? '')).toBeNull();

    const readOnly = createDashboard({ store, basePath: BASE, logger: silentLogger });
    const page = await readOnly.fetch(new Request(`${origin}${BASE}/deadletter`));
    expect(await page.text()).not.toContain('<form method="post"');
    const refused = await readOnly.fetch(
      new Request(`${origin}${BASE}/deadletter/bulk`, {
        method: 'POST',
        headers: form,
        body: 'op=delete&type=bulk-dead',
      }),
    );
    expect(refused.status).toBe(403);
    expect(await store.bulk?.countJobs({ type: 'bulk-dead' })).toBe(2);
  });

  it('mounts under a base path: Express-style baseUrl, a node prefix, and fetch', async (t) => {
    if (!backend) return t.skip();
    const response = await page.goto(`${origin}/express/jobs?type=page-me`);
    expect(response?.status()).toBe(200);
    const links = await page
      .locator('header a, a[rel=next]')
      .evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''));
    expect(links.length).toBeGreaterThan(5);
    for (const link of links) expect(link.startsWith('/express/')).toBe(true);
    await page.click('a[rel=next]');
    expect(new URL(page.url()).pathname).toBe('/express/jobs');
    expect(await page.locator('tbody tr').count()).toBe(50);
    // Outside the base path the app's own routes answer.
    expect((await fetch(`${origin}/elsewhere`)).status).toBe(404);
    expect(await (await fetch(`${origin}/elsewhere`)).text()).toBe('app 404');

    // An app served under its own name lists it.
    const fetchStyle = createDashboard({
      store,
      basePath: '/hono/jobs/',
      logger: silentLogger,
      allowedHosts: ['app.test'],
    });
    const jobs = await fetchStyle.fetch(new Request('http://app.test/hono/jobs/jobs?state=timer'));
    expect(jobs.status).toBe(200);
    const body = await jobs.text();
    expect(body).toContain('href="/hono/jobs/deadletter"');
    const css = /href="(\/hono\/jobs\/assets\/[^"]+\.css)"/.exec(body)?.[1] ?? '';
    expect(
      (await fetchStyle.fetch(new Request(`http://app.test${css}`))).headers.get('content-type'),
    ).toContain('text/css');
  });

  it('answers its own errors with a generic page, never a stack trace', async (t) => {
    if (!backend) return t.skip();
    const logged: unknown[] = [];
    const failing = new Proxy(store, {
      get(target, name, receiver) {
        if (name === 'listSchedules') {
          return async () => {
            throw new Error('secret-marker: connection string postgres://user:pw@db');
          };
        }
        const value = Reflect.get(target, name, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const dashboard = createDashboard({
      store: failing,
      logger: { ...silentLogger, error: (message, data) => logged.push({ message, data }) },
    });
    const response = await dashboard.fetch(new Request('http://localhost/schedules'));
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).toContain('Something went wrong');
    expect(text).not.toContain('secret-marker');
    expect(text).not.toMatch(/\bat .*\.ts:\d+/);
    expect(logged).toHaveLength(1);
  });
}
