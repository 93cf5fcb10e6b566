import { describe, expect, it } from 'vitest';
import { MemoryJobStore } from '../src/memory-store.js';
import type { JobRef } from '../src/store.js';
import { engine, waitFor } from './helpers.js';

type Fault = 'none' | 'refuse' | 'black-hole';

/** A store whose clock reads and lease renewals can be made to fail or to never answer. */
class FaultyStore extends MemoryJobStore {
  clockFault: Fault = 'none';
  renewalFault: Fault = 'none';
  renewals = 0;

  override now(): Promise<Date> {
    return faulty(this.clockFault, 'clock read', () => super.now());
  }

  override renewLeases(owner: string, leaseMs: number, jobs: readonly JobRef[]) {
    this.renewals += 1;
    return faulty(this.renewalFault, 'renewal', () => super.renewLeases(owner, leaseMs, jobs));
  }
}

function faulty<T>(fault: Fault, what: string, call: () => Promise<T>): Promise<T> {
  if (fault === 'refuse') return Promise.reject(new Error(`connection refused (${what})`));
  if (fault === 'black-hole') return new Promise<T>(() => {});
  return call();
}

/** An engine with one `hold` handler that runs until `release()` is called. */
function holdingEngine(store: FaultyStore, leaseMs = 300) {
  let release = (): void => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const e = engine({ store, leaseMs, logger: silent, handlers: { hold: () => released } });
  return { engine: e, release };
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

describe('engine.health()', () => {
  it('is not ok before start(), though the store answers', async () => {
    const e = engine({ store: new MemoryJobStore(), handlers: { work: () => {} } });
    expect(await e.health()).toEqual({
      ok: false,
      state: 'idle',
      store: 'reachable',
      storeError: null,
      renewals: 'idle',
      lastRenewalOkAt: null,
      leasesHeld: 0,
    });
  });

  it('is ok while running, and counts the leases it holds and renews', async () => {
    const store = new FaultyStore();
    const { engine: e, release } = holdingEngine(store);
    await e.start();
    expect(await e.health()).toMatchObject({ ok: true, state: 'running', renewals: 'idle' });
    await e.enqueue('hold', {});
    await e.enqueue('hold', {});
    await waitFor(() => store.renewals > 0 && e.snapshot().executing === 2, 'a renewal');
    await waitFor(async () => (await e.health()).lastRenewalOkAt !== null, 'a renewal ok');
    const health = await e.health();
    expect(health).toMatchObject({
      ok: true,
      store: 'reachable',
      renewals: 'ok',
      leasesHeld: 2,
    });
    expect(health.lastRenewalOkAt).toBeInstanceOf(Date);
    release();
    await waitFor(async () => (await e.health()).leasesHeld === 0, 'jobs settled');
  });

  it('says the store is unreachable when it refuses, and ok again when it answers', async () => {
    const store = new FaultyStore();
    const e = engine({ store, logger: silent, handlers: { work: () => {} } });
    await e.start();
    store.clockFault = 'refuse';
    const down = await e.health();
    expect(down).toMatchObject({ ok: false, state: 'running', store: 'unreachable' });
    expect(down.storeError).toContain('connection refused');
    store.clockFault = 'none';
    expect(await e.health()).toMatchObject({ ok: true, store: 'reachable', storeError: null });
  });

  it('returns when the store never answers, saying it timed out', async () => {
    const store = new FaultyStore();
    const e = engine({ store, logger: silent, handlers: { work: () => {} } });
    await e.start();
    store.clockFault = 'black-hole';
    const health = await e.health({ timeoutMs: 50 });
    expect(health).toMatchObject({ ok: false, store: 'unreachable' });
    expect(health.storeError).toContain('did not answer in 50 ms');
  });

  it('is not ok while lease renewals fail, and ok again once one succeeds', async () => {
    const store = new FaultyStore();
    const { engine: e, release } = holdingEngine(store);
    await e.start();
    await e.enqueue('hold', {});
    await waitFor(() => e.snapshot().executing === 1, 'the job running');
    store.renewalFault = 'refuse';
    await waitFor(async () => (await e.health()).renewals === 'failing', 'renewals failing');
    expect(await e.health()).toMatchObject({ ok: false, store: 'reachable', leasesHeld: 1 });
    store.renewalFault = 'none';
    await waitFor(async () => (await e.health()).ok, 'ok again');
    expect((await e.health()).renewals).toBe('ok');
    release();
  });

  it('is not ok while a lease renewal hangs past its heartbeat period', async () => {
    const store = new FaultyStore();
    // A long lease: the hung renewal is noticed well before the local deadline aborts the job.
    const { engine: e, release } = holdingEngine(store, 3_000);
    await e.start();
    await e.enqueue('hold', {});
    await waitFor(() => e.snapshot().executing === 1, 'the job running');
    store.renewalFault = 'black-hole';
    const renewalsBefore = store.renewals;
    await waitFor(() => store.renewals > renewalsBefore, 'a renewal sent into the black hole');
    await waitFor(async () => (await e.health()).renewals === 'failing', 'renewal noticed hung');
    expect(await e.health()).toMatchObject({ ok: false, store: 'reachable', leasesHeld: 1 });
    release();
  });

  it('is not ok once stopped', async () => {
    const e = engine({ store: new MemoryJobStore(), handlers: { work: () => {} } });
    await e.start();
    await e.stop({ timeoutMs: 1_000 });
    expect(await e.health()).toMatchObject({ ok: false, state: 'stopped' });
  });

  it('is ok for a running client engine, which holds no leases', async () => {
    const e = engine({ store: new MemoryJobStore() });
    await e.start();
    expect(await e.health()).toMatchObject({ ok: true, renewals: 'idle', leasesHeld: 0 });
  });

  it('rejects a timeout that is not a whole number of milliseconds', async () => {
    const e = engine({ store: new MemoryJobStore() });
    await expect(e.health({ timeoutMs: 0 })).rejects.toThrow(/health\.timeoutMs/);
  });
});
