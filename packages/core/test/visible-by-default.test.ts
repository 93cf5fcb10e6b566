import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineEvents } from '../src/engine/types.js';
import { StoreError } from '../src/errors.js';
import { MemoryJobStore } from '../src/memory-store.js';
import type { AcquireRequest } from '../src/store.js';
import { engine, newJob, waitFor } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('visible by default', () => {
  it('without a logger, the first error of a streak is a console warning and the recovery an info line', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const store = new MemoryJobStore();
    let failing = true;
    const acquire = store.acquire.bind(store);
    store.acquire = (request: AcquireRequest) =>
      failing ? Promise.reject(new StoreError('connection refused')) : acquire(request);
    const e = engine({ store, pollIntervalMs: 50, handlers: { t: async () => {} } });
    await e.start();
    await waitFor(() => warn.mock.calls.length > 0, 'a warning');
    // Several failed polls later, still one warning for the streak.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const warnings = warn.mock.calls.map((c) => String(c[0]));
    expect(warnings.filter((w) => w.includes('acquire failed'))).toHaveLength(1);
    expect(warnings[0]).toContain('connection refused');
    failing = false;
    await waitFor(
      () => log.mock.calls.some((c) => String(c[0]).includes('acquire works again')),
      'the recovery line',
    );
  });

  it('says when due jobs wait whose type no handler of the engine runs, and admin.stats() lists them', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const store = new MemoryJobStore();
    const now = await store.now();
    await store.enqueue([
      newJob({ type: 'orphan', dueAt: new Date(now.getTime() - 5 * 60_000) }),
      newJob({ type: 'orphan', dueAt: new Date(now.getTime() - 2 * 60_000) }),
      newJob({ type: 'fresh' }),
      newJob({ type: 'handled', dueAt: new Date(now.getTime() - 5 * 60_000) }),
    ]);
    const events: EngineEvents['unhandled-jobs'][] = [];
    const e = engine({ store, handlers: { handled: async () => {} } });
    e.on('unhandled-jobs', (event) => events.push(event));
    await e.start();
    await waitFor(() => events.length > 0, 'the unhandled-jobs event');
    expect(events[0]?.types.map((t) => [t.type, t.count])).toEqual([['orphan', 2]]);
    expect(warn.mock.calls.some((c) => String(c[0]).includes('"orphan"'))).toBe(true);
    const stats = await e.admin.stats();
    expect(stats.unhandled.map((t) => t.type)).toEqual(['orphan']);
  });
});
