import { describe, expect, it } from 'vitest';
import { MAX_RATE_KEY_LENGTH, windowKey } from '../src/engine/runtime.js';
import {
  FakeClock,
  type Job,
  JobEngine,
  type JobStore,
  MemoryJobStore,
  type StoreCapabilities,
  ValidationError,
} from '../src/index.js';
import { engine, sleep, waitFor } from './helpers.js';

/** A memory store that keeps neither scope limits above 1, key modes nor rate limits. */
function storeWithout(): JobStore {
  const store = new MemoryJobStore();
  const capabilities: StoreCapabilities = {
    ...store.capabilities,
    scopeLimits: false,
    keyModes: false,
  };
  Object.defineProperty(store, 'capabilities', { value: capabilities });
  Object.defineProperty(store, 'rateLimits', { value: undefined });
  return store;
}

describe('scope limit and key mode validation', () => {
  const client = new JobEngine({ store: new MemoryJobStore() });

  const bad: Array<[string, () => Promise<unknown>, string]> = [
    ['scopeLimit without scope', () => client.enqueue('t', {}, { scopeLimit: 2 }), 'scopeLimit'],
    ['scopeLimit 0', () => client.enqueue('t', {}, { scope: 's', scopeLimit: 0 }), 'scopeLimit'],
    [
      'fractional scopeLimit',
      () => client.enqueue('t', {}, { scope: 's', scopeLimit: 1.5 }),
      'scopeLimit',
    ],
    [
      'scopeLimit above 1000',
      () => client.enqueue('t', {}, { scope: 's', scopeLimit: 1001 }),
      'scopeLimit',
    ],
    [
      'exclusive with scopeLimit 3',
      () => client.enqueue('t', {}, { scope: 's', exclusive: true, scopeLimit: 3 }),
      'scopeLimit',
    ],
    [
      'unknown keyMode',
      () => client.enqueue('t', {}, { key: 'k', keyMode: 'merge' as never }),
      'keyMode',
    ],
    ['keyMode without key', () => client.enqueue('t', {}, { keyMode: 'replace' }), 'keyMode'],
  ];
  for (const [what, call, field] of bad) {
    it(`rejects ${what} with a ValidationError naming ${field}`, async () => {
      const error = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).message).toContain(field);
    });
  }

  it('exclusive with scopeLimit 1 is accepted and stored as exclusive', async () => {
    const job = await client.enqueue('t', {}, { scope: 's', exclusive: true, scopeLimit: 1 });
    expect({ exclusive: job.exclusive, scopeLimit: job.scopeLimit }).toEqual({
      exclusive: true,
      scopeLimit: 1,
    });
  });

  it("a handler's scopeLimit is the default of its scoped jobs, not of unscoped or exclusive ones", async () => {
    const store = new MemoryJobStore();
    const e = new JobEngine({
      store,
      handlers: { report: { handler: () => {}, scopeLimit: 4 } },
    });
    const scoped = await e.enqueue('report', {}, { scope: 'acct' });
    const unscoped = await e.enqueue('report', {});
    const exclusive = await e.enqueue('report', {}, { scope: 'acct', exclusive: true });
    const own = await e.enqueue('report', {}, { scope: 'acct', scopeLimit: 2 });
    expect([scoped, unscoped, exclusive, own].map((j) => j.scopeLimit ?? null)).toEqual([
      4,
      null,
      1,
      2,
    ]);
  });

  it('rejects a bad handler scopeLimit when the engine is built', () => {
    expect(
      () =>
        new JobEngine({
          store: new MemoryJobStore(),
          handlers: { report: { handler: () => {}, scopeLimit: 0 } },
        }),
    ).toThrow(/handlers\.report\.scopeLimit/);
  });

  it('refuses scope limits above 1 and key modes on a store without the capability, writing nothing', async () => {
    const store = storeWithout();
    const e = new JobEngine({ store });
    await expect(e.enqueue('t', {}, { scope: 's', scopeLimit: 2 })).rejects.toThrow(
      /capabilities\.scopeLimits/,
    );
    await expect(e.enqueue('t', {}, { key: 'k', keyMode: 'debounce' })).rejects.toThrow(
      /capabilities\.keyModes/,
    );
    expect((await e.admin.stats()).total).toBe(0);
    // A limit of 1 is exclusive, which every store keeps.
    expect((await e.enqueue('t', {}, { scope: 's', scopeLimit: 1 })).exclusive).toBe(true);
    expect(
      () => new JobEngine({ store, handlers: { t: { handler: () => {}, scopeLimit: 3 } } }),
    ).toThrow(/capabilities\.scopeLimits/);
  });
});

describe('scope limits and key modes in engines', () => {
  it('engines sharing a store never run more than scopeLimit jobs of a scope at once, and reach it', async () => {
    const store = new MemoryJobStore();
    const active = new Map<string, number>();
    const peak = new Map<string, number>();
    const seen: number[] = [];
    const handler = async (job: Job<{ n: number }>) => {
      const scope = job.scope as string;
      const now = (active.get(scope) ?? 0) + 1;
      active.set(scope, now);
      peak.set(scope, Math.max(peak.get(scope) ?? 0, now));
      await sleep(5);
      seen.push(job.payload.n);
      active.set(scope, (active.get(scope) ?? 0) - 1);
    };
    const es = [0, 1, 2].map(() => engine({ store, concurrency: 8, handlers: { x: handler } }));
    const client = new JobEngine({ store });
    await client.enqueueMany(
      Array.from({ length: 30 }, (_, n) => ({
        type: 'x',
        payload: { n },
        options: { scope: n % 2 ? 'two' : 'three', scopeLimit: n % 2 ? 2 : 3 },
      })),
    );
    await Promise.all(es.map((e) => e.start()));
    await waitFor(() => seen.length === 30, 'all limited jobs');
    expect(peak.get('two')).toBeLessThanOrEqual(2);
    expect(peak.get('three')).toBeLessThanOrEqual(3);
    expect(peak.get('three')).toBeGreaterThan(1);
  });

  it('debounce through the engine runs one job with the last payload, after the last push', async () => {
    const store = new MemoryJobStore();
    const ran: unknown[] = [];
    const e = engine({ store, handlers: { reindex: (job) => void ran.push(job.payload) } });
    await e.start();
    for (let v = 1; v <= 5; v++) {
      await e.enqueue('reindex', { v }, { key: 'doc-1', keyMode: 'debounce', delayMs: 150 });
      await sleep(20);
    }
    await waitFor(() => ran.length === 1, 'the debounced job');
    await sleep(200);
    expect(ran).toEqual([{ v: 5 }]);
  });
});

describe('rate limits in engines', () => {
  /** Engines on one memory store and one fake clock, recording each start. */
  function rig(rateLimit: { max: number; perMs: number; key?: (job: Job) => string }) {
    const clock = new FakeClock();
    const store = new MemoryJobStore({ clock });
    const started: Job[] = [];
    const attempts: number[] = [];
    let pushBackOnce = false;
    const es = [0, 1, 2].map(() =>
      engine({
        store,
        clock,
        concurrency: 10,
        leaseMs: 5_000,
        handlers: {
          call: {
            rateLimit,
            handler: async (job, ctx) => {
              if (pushBackOnce) {
                pushBackOnce = false;
                return ctx.rateLimited(5_000);
              }
              started.push(job);
              attempts.push(ctx.attempt);
            },
          },
        },
      }),
    );
    return {
      clock,
      store,
      started,
      attempts,
      es,
      pushBack: () => {
        pushBackOnce = true;
      },
      /** Lets every engine look again, then waits until nothing more starts for a while. */
      async settle(): Promise<number> {
        for (const e of es) e.poll();
        let last = -1;
        while (last !== started.length) {
          last = started.length;
          await sleep(150);
          for (const e of es) e.poll();
        }
        return started.length;
      },
    };
  }

  it('engines sharing a store start at most max jobs per window, and the rest wait uncounted', async () => {
    const r = rig({ max: 3, perMs: 1_000 });
    const client = new JobEngine({ store: r.store, clock: r.clock });
    await client.enqueueMany(
      Array.from({ length: 8 }, (_, n) => ({ type: 'call', payload: { n } })),
    );
    await Promise.all(r.es.map((e) => e.start()));
    expect(await r.settle()).toBe(3);
    r.clock.advance(999);
    expect(await r.settle()).toBe(3);
    r.clock.advance(1);
    expect(await r.settle()).toBe(6);
    r.clock.advance(1_000);
    expect(await r.settle()).toBe(8);
    // Waiting over the limit never counted an attempt.
    expect(r.attempts).toEqual(r.attempts.map(() => 1));
  });

  it('a keyed rate limit gives each key its own window', async () => {
    const r = rig({ max: 1, perMs: 1_000, key: (job) => (job.payload as { host: string }).host });
    const client = new JobEngine({ store: r.store, clock: r.clock });
    await client.enqueueMany(
      ['a', 'a', 'b', 'b', 'c'].map((host) => ({ type: 'call', payload: { host } })),
    );
    await Promise.all(r.es.map((e) => e.start()));
    expect(await r.settle()).toBe(3);
    expect(r.started.map((j) => (j.payload as { host: string }).host).sort()).toEqual([
      'a',
      'b',
      'c',
    ]);
    r.clock.advance(1_000);
    expect(await r.settle()).toBe(5);
  });

  it('ctx.rateLimited(ms) puts the job back uncounted and holds its key back for ms', async () => {
    const r = rig({ max: 5, perMs: 1_000 });
    r.pushBack();
    const client = new JobEngine({ store: r.store, clock: r.clock });
    const first = await client.enqueue('call', { n: 1 });
    await Promise.all(r.es.map((e) => e.start()));
    await waitFor(async () => (await r.store.getJob(first.id))?.state === 'timer', 'the push-back');
    await client.enqueue('call', { n: 2 });
    r.clock.advance(4_000);
    expect(await r.settle()).toBe(0);
    r.clock.advance(1_000);
    expect(await r.settle()).toBe(2);
    expect(r.attempts).toEqual([1, 1]);
  });

  it.each([
    [
      'throws',
      (job: Job): string => {
        throw new Error(`no host in job ${job.id}`);
      },
    ],
    ['returns a name no store keeps (NUL)', () => 'host\u0000'],
  ])(
    'a key function that %s counts the job against its type window and reports it',
    async (_, key) => {
      const r = rig({ max: 2, perMs: 1_000, key });
      const errors: string[] = [];
      for (const e of r.es) e.on('error', ({ during }) => void errors.push(during));
      const client = new JobEngine({ store: r.store, clock: r.clock });
      await client.enqueueMany([1, 2, 3].map((n) => ({ type: 'call', payload: { n } })));
      await Promise.all(r.es.map((e) => e.start()));
      expect(await r.settle()).toBe(2);
      r.clock.advance(1_000);
      expect(await r.settle()).toBe(3);
      expect(errors).toContain('rate limit key');
    },
  );

  it('refuses a rate limit on a store without rate limits', () => {
    expect(
      () =>
        new JobEngine({
          store: storeWithout(),
          handlers: { t: { handler: () => {}, rateLimit: { max: 1, perMs: 1000 } } },
        }),
    ).toThrow(/keeps no rate limits \(it has no `rateLimits`\)/);
  });

  it('keeps window keys to what every store holds: a longer type|key is its hash, the same on every node', () => {
    const short = `${'t'.repeat(100)}|${'k'.repeat(154)}`;
    expect(windowKey(short)).toBe(short);
    const long = `${'t'.repeat(255)}|${'k'.repeat(200)}`;
    const hashed = windowKey(long);
    expect(hashed).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(hashed.length).toBeLessThanOrEqual(MAX_RATE_KEY_LENGTH);
    expect(windowKey(long)).toBe(hashed);
    expect(windowKey(`${long} `)).not.toBe(hashed);
  });
});
