/**
 * `FlakyJobStore`: wraps any `JobStore` and makes a share of its write and acquire calls fail,
 * either BEFORE the call reaches the store (nothing happened) or AFTER it took effect (it
 * happened, but the caller only sees an error) — the two ways a network or database hiccup
 * looks to an engine. Like Quartz's FlakyJdbcSchedulerTest. Seeded, so a failure replays.
 */
import {
  type AcquireRequest,
  type EnqueueOptions,
  type EnqueueResult,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobStore,
  type ListJobsRequest,
  type MigrationResult,
  type NewJob,
  type RecoverResult,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
} from '@jobs/core';
import { seededRandom } from './harness.js';

/** The methods faults are injected into. Reads and admin calls pass through untouched. */
export type FlakyMethod =
  | 'enqueue'
  | 'acquire'
  | 'completeAndAcquire'
  | 'complete'
  | 'fail'
  | 'release'
  | 'renewLeases'
  | 'recoverExpiredLeases'
  | 'fireSchedule';

const ALL_METHODS: readonly FlakyMethod[] = [
  'enqueue',
  'acquire',
  'completeAndAcquire',
  'complete',
  'fail',
  'release',
  'renewLeases',
  'recoverExpiredLeases',
  'fireSchedule',
];

export interface FlakyJobStoreOptions {
  /** Share of calls that fail, 0..1. Default 0.2. */
  failureRate?: number;
  /** PRNG seed; the same seed and call sequence inject the same faults. Default 1. */
  seed?: number;
  /** Where a fault happens: before the inner call, after it, or either (default, 50/50). */
  mode?: 'before' | 'after' | 'both';
  /** Methods to inject into. Default: every write and acquire method. */
  methods?: readonly FlakyMethod[];
}

export interface FaultCounts {
  /** Calls to flaky methods. */
  calls: number;
  /** Faults thrown before the inner call (it never happened). */
  before: number;
  /** Faults thrown after the inner call took effect (its result was thrown away). */
  after: number;
  /** Faults by method. */
  byMethod: Partial<Record<FlakyMethod, number>>;
}

/** The error a `FlakyJobStore` throws; `injected` says when. */
export class InjectedFaultError extends StoreError {
  constructor(
    readonly method: FlakyMethod,
    readonly injected: 'before' | 'after',
  ) {
    super(
      `[@jobs/conformance] injected fault ${injected} ${method}${injected === 'after' ? ' (the call took effect)' : ''}`,
    );
    this.name = 'InjectedFaultError';
  }
}

/**
 * @example
 * const store = new FlakyJobStore(new MemoryJobStore(), { failureRate: 0.2, seed: 42 });
 * // ... run an engine on it ...
 * store.enabled = false; // stop injecting, e.g. to check the end state
 * console.log(store.faults); // { calls, before, after, byMethod }
 */
export class FlakyJobStore implements JobStore {
  readonly name: string;
  readonly capabilities: StoreCapabilities;
  /** Set to false to stop injecting (calls pass through). */
  enabled = true;
  readonly faults: FaultCounts = { calls: 0, before: 0, after: 0, byMethod: {} };
  // NonNullable: `JobStore['x']` of an optional member includes `undefined`, which a consumer
  // with `exactOptionalPropertyTypes` cannot assign to `JobStore`.
  readonly completeAndAcquire?: NonNullable<JobStore['completeAndAcquire']>;
  readonly subscribe?: NonNullable<JobStore['subscribe']>;
  readonly reserveConnections?: NonNullable<JobStore['reserveConnections']>;

  private readonly rate: number;
  private readonly mode: 'before' | 'after' | 'both';
  private readonly methods: ReadonlySet<FlakyMethod>;
  /** Seeded, so a run's faults can be replayed. */
  private readonly random: () => number;

  constructor(
    readonly inner: JobStore,
    options: FlakyJobStoreOptions = {},
  ) {
    const rate = options.failureRate ?? 0.2;
    if (!(rate >= 0 && rate <= 1)) {
      throw new RangeError(
        `[@jobs/conformance] FlakyJobStore: failureRate must be in 0..1, got ${rate}`,
      );
    }
    this.rate = rate;
    this.mode = options.mode ?? 'both';
    this.methods = new Set(options.methods ?? ALL_METHODS);
    this.random = seededRandom(options.seed ?? 1);
    this.name = `flaky(${inner.name})`;
    this.capabilities = { ...inner.capabilities };
    const completeAndAcquire = inner.completeAndAcquire;
    if (completeAndAcquire) {
      this.completeAndAcquire = (done, request) =>
        this.flaky('completeAndAcquire', () => completeAndAcquire.call(inner, done, request));
    }
    const subscribe = inner.subscribe;
    if (subscribe) this.subscribe = (listener) => subscribe.call(inner, listener);
    // Passed through: engines on the wrapper use the inner store's pool.
    const reserve = inner.reserveConnections;
    if (reserve) this.reserveConnections = (connections) => reserve.call(inner, connections);
  }

  private async flaky<T>(method: FlakyMethod, call: () => Promise<T>): Promise<T> {
    if (!this.enabled || !this.methods.has(method)) return call();
    this.faults.calls += 1;
    const hit = this.random() < this.rate;
    const when: 'before' | 'after' =
      this.mode === 'both' ? (this.random() < 0.5 ? 'before' : 'after') : this.mode;
    if (hit && when === 'before') {
      this.count(method, 'before');
      throw new InjectedFaultError(method, 'before');
    }
    const result = await call();
    if (hit) {
      this.count(method, 'after');
      throw new InjectedFaultError(method, 'after');
    }
    return result;
  }

  private count(method: FlakyMethod, when: 'before' | 'after'): void {
    this.faults[when] += 1;
    this.faults.byMethod[method] = (this.faults.byMethod[method] ?? 0) + 1;
  }

  // biome-ignore lint/suspicious/noConfusingVoidType: whatever the wrapped store's migrate() gives
  migrate(): Promise<MigrationResult | void> {
    return this.inner.migrate();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  now(): Promise<Date> {
    return this.inner.now();
  }
  enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    return this.flaky('enqueue', () => this.inner.enqueue(jobs, options));
  }
  acquire(request: AcquireRequest): Promise<Job[]> {
    return this.flaky('acquire', () => this.inner.acquire(request));
  }
  complete(jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.flaky('complete', () => this.inner.complete(jobs));
  }
  fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    return this.flaky('fail', () => this.inner.fail(failures));
  }
  release(jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.flaky('release', () => this.inner.release(jobs));
  }
  renewLeases(owner: string, leaseMs: number, jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.flaky('renewLeases', () => this.inner.renewLeases(owner, leaseMs, jobs));
  }
  recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    return this.flaky('recoverExpiredLeases', () => this.inner.recoverExpiredLeases(limit));
  }
  nextDueAt(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): Promise<Date | null> {
    return this.inner.nextDueAt(request);
  }
  getJob(id: string): Promise<Job | null> {
    return this.inner.getJob(id);
  }
  listJobs(request: ListJobsRequest): Promise<Job[]> {
    return this.inner.listJobs(request);
  }
  retryDeadletter(id: string, retries: number): Promise<Job | null> {
    return this.inner.retryDeadletter(id, retries);
  }
  deleteJob(id: string): Promise<boolean> {
    return this.inner.deleteJob(id);
  }
  suspend(filter: JobFilter): Promise<number> {
    return this.inner.suspend(filter);
  }
  activate(filter: JobFilter): Promise<number> {
    return this.inner.activate(filter);
  }
  stats(): Promise<StatsRow[]> {
    return this.inner.stats();
  }
  saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.inner.saveSchedule(request);
  }
  getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.inner.getSchedule(name);
  }
  listSchedules(): Promise<ScheduleRecord[]> {
    return this.inner.listSchedules();
  }
  deleteSchedule(name: string): Promise<boolean> {
    return this.inner.deleteSchedule(name);
  }
  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.inner.setSchedulePaused(name, paused);
  }
  dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    return this.inner.dueSchedules(limit);
  }
  fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    return this.flaky('fireSchedule', () => this.inner.fireSchedule(fire));
  }
}
