/**
 * What every group file shares: opening fresh stores and peers (and closing them after each
 * test), a builder for new jobs, acquire with defaults, the raw-job check and small waiting
 * helpers. Groups never share state, so any test can run alone.
 */
import {
  type AcquireRequest,
  refOf as coreRefOf,
  type FakeClock,
  type Job,
  type JobRef,
  type JobStore,
  type NewJob,
} from '@jobs/core';
import { rowToJob } from '@jobs/core/sql';
import { expect } from 'vitest';
import type { ConformanceOptions, ProcessPeerSpec } from './options.js';

/** Default of `ConformanceOptions.timeoutMs`: the time limit of an ordinary test. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** The job type the suite enqueues unless a test says otherwise. */
export const WORK = 'work';

/** A valid `NewJob` with neutral defaults: due now, priority 0, 3 retries, queue `default`. */
export function makeNewJob(overrides: Partial<NewJob> = {}): NewJob {
  return {
    type: WORK,
    payload: {},
    dueAt: null,
    delayMs: 0,
    priority: 0,
    retries: 3,
    scope: null,
    exclusive: false,
    key: null,
    tenantId: null,
    queue: 'default',
    retryPolicy: null,
    schedule: null,
    occurrence: null,
    shard: null,
    ...overrides,
  };
}

/** `{ id, token }` of a job returned by acquire, and its scope when it is limited (as engines send). */
export function refOf(job: Job): JobRef {
  if (job.lockToken === null) throw new Error(`job ${job.id} has no lock token (not acquired?)`);
  return coreRefOf(job);
}

/**
 * A small seeded random number generator (mulberry32): numbers in [0, 1), the same sequence for
 * the same seed, so a failing round can be replayed.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 10_000,
  intervalMs = 10,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Acquire with the suite's defaults: owner `owner-a`, limit 100, 30 s lease, type `work`. */
export function acquire(store: JobStore, request: Partial<AcquireRequest> = {}): Promise<Job[]> {
  return store.acquire({
    owner: 'owner-a',
    limit: 100,
    leaseMs: 30_000,
    types: [WORK],
    queues: null,
    tenants: null,
    ...request,
  });
}

/** Enqueues jobs and returns the stored jobs in input order. */
export async function enqueueJobs(
  store: JobStore,
  jobs: readonly Partial<NewJob>[],
): Promise<Job[]> {
  const results = await store.enqueue(jobs.map((j) => makeNewJob(j)));
  return results.map((r) => r.job);
}

/** Enqueues `n` jobs, acquires and completes them (result `{ n: i }`, duration 5 ms). */
export async function completeJobs(store: JobStore, n: number, type = 'work'): Promise<Job[]> {
  const jobs = await enqueueJobs(
    store,
    Array.from({ length: n }, () => ({ type })),
  );
  const held = await acquire(store, { types: [type], limit: n });
  const { lost } = await store.complete(
    held.map((job, i) => ({ ...refOf(job), resultJson: JSON.stringify({ n: i }), durationMs: 5 })),
  );
  expect(lost).toEqual([]);
  return jobs;
}

/** The store's clock, in ms. */
export async function storeNow(store: JobStore): Promise<number> {
  return (await store.now()).getTime();
}

/**
 * The time the store acquired a job, on its clock: the lease started there. Lets tests check
 * "never before due" without trusting the test machine's timing.
 */
export function acquiredAt(job: Job, leaseMs: number): number {
  if (job.lockExpiresAt === null) throw new Error(`job ${job.id} has no lease`);
  return job.lockExpiresAt.getTime() - leaseMs;
}

export class Harness<S extends JobStore = JobStore> {
  readonly rounds: number;
  readonly peerCount: number;
  readonly processCount: number;
  /** Time limit of an ordinary test (and of the cleanup after each test), in ms. */
  readonly timeoutMs: number;
  private opened: { store: S; peers: JobStore[] }[] = [];
  private deferred: (() => Promise<void>)[] = [];

  constructor(readonly options: ConformanceOptions<S>) {
    this.rounds = options.rounds ?? 10;
    this.peerCount = options.peers ?? 4;
    this.processCount = options.processes ?? 2;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /**
   * The time limit to give a test that does `weight` times the work of an ordinary one (an
   * engine run, several seconds of real schedule time). Waits inside such a test stay well
   * below it, so they fail first, with a message that says what never happened.
   */
  timeout(weight = 1): number {
    return Math.round(this.timeoutMs * weight);
  }

  /**
   * The time limit for a test that repeats a race `rounds` times: `timeout(weight)`, scaled up
   * when `rounds` is above the default 10.
   */
  raceTimeout(weight = 1): number {
    return this.timeout(weight * Math.max(1, this.rounds / 10));
  }

  /** True when peers are separate connections (not the store itself). */
  get hasPeers(): boolean {
    return this.options.connectPeer !== undefined;
  }

  /** True when the options read stored jobs around the store (`readRaw` or `readRawJob`). */
  get hasRaw(): boolean {
    return this.options.readRaw !== undefined || this.options.readRawJob !== undefined;
  }

  /** A fresh store on an empty database, migrated twice (migrate must be idempotent). */
  async open(): Promise<S> {
    return this.track(await this.options.createStore());
  }

  /**
   * A fresh store reading its time from `clock` (`createStoreOnClock`), migrated twice; the
   * test is skipped, with the reason, when the options give no such factory.
   */
  async openOnClock(clock: FakeClock, ctx: { skip(note: string): never }): Promise<S> {
    const create = this.options.createStoreOnClock;
    if (!create) ctx.skip('no createStoreOnClock option: the store takes no injected clock');
    return this.track(await create(clock));
  }

  private async track(store: S): Promise<S> {
    this.opened.push({ store, peers: [] });
    await store.migrate();
    await store.migrate();
    return store;
  }

  /**
   * `count` other store instances on the same database (each with its own connections), or
   * `store` itself repeated when the options give no `connectPeer`.
   */
  async peers(store: S, count = this.peerCount): Promise<JobStore[]> {
    const connect = this.options.connectPeer;
    if (!connect) return Array.from({ length: count }, () => store);
    const entry = this.opened.find((e) => e.store === store);
    if (!entry) throw new Error('peers() needs a store opened by this harness');
    const peers: JobStore[] = [];
    for (let i = 0; i < count; i++) {
      const peer = await connect(store);
      entry.peers.push(peer);
      peers.push(peer);
    }
    return peers;
  }

  /** One peer; see `peers`. */
  async peer(store: S): Promise<JobStore> {
    const [peer] = await this.peers(store, 1);
    return peer as JobStore;
  }

  processPeer(store: S): ProcessPeerSpec | null {
    return this.options.processPeer ? this.options.processPeer(store) : null;
  }

  /**
   * The child-process spec for a multi-process test; without one (no `processPeer` option, or
   * a store that is not `multiProcess`) the test is skipped with the reason.
   */
  processPeerOrSkip(store: S, ctx: { skip(note: string): never }): ProcessPeerSpec {
    const spec = this.processPeer(store);
    if (spec && store.capabilities.multiProcess) return spec;
    ctx.skip('no processPeer option or the store is not multiProcess');
  }

  /**
   * Job `id` as stored, read around the store: the store's `readRawJob`, or its raw SQL row
   * (`readRaw`) mapped like a SQL store maps it; null if absent.
   */
  async raw(store: S, id: string): Promise<Job | null> {
    const { readRaw, readRawJob } = this.options;
    if (readRawJob) return readRawJob(store, id);
    if (!readRaw) throw new Error('raw() needs options.readRaw or options.readRawJob');
    const row = await readRaw(store, id);
    return row === null ? null : rowToJob(row);
  }

  /**
   * Checks the stored job `id` around the store when `readRaw` or `readRawJob` is given (and
   * always checks what `getJob` returns): `expected` null means "not stored".
   */
  async expectStored(store: S, id: string, expected: Partial<Job> | null): Promise<void> {
    const seen = await store.getJob(id);
    if (expected === null) expect(seen, `getJob(${id})`).toBeNull();
    else expect(seen, `getJob(${id})`).toMatchObject(expected);
    if (!this.hasRaw) return;
    const row = await this.raw(store, id);
    if (expected === null) expect(row, `raw row of job ${id}`).toBeNull();
    else expect(row, `raw row of job ${id}`).toMatchObject(expected);
  }

  /** Runs `fn` after the current test, before its stores close (e.g. stopping engines). */
  defer(fn: () => Promise<void>): void {
    this.deferred.push(fn);
  }

  /** Closes every store and peer opened by the current test, then destroys the stores. */
  async cleanup(): Promise<void> {
    const deferred = this.deferred.reverse();
    this.deferred = [];
    const opened = this.opened;
    this.opened = [];
    const errors: unknown[] = [];
    for (const fn of deferred) await fn().catch((e: unknown) => errors.push(e));
    for (const { store, peers } of opened) {
      for (const peer of peers) {
        if (peer === store) continue;
        await peer.close().catch((e: unknown) => errors.push(e));
      }
      await store.close().catch((e: unknown) => errors.push(e));
      if (this.options.destroyStore) {
        await this.options.destroyStore(store).catch((e: unknown) => errors.push(e));
      }
    }
    if (errors.length > 0) {
      throw new AggregateError(
        errors,
        `[@jobs/conformance] cleanup: ${errors.length} close error(s)`,
      );
    }
  }
}
