/**
 * `MemoryJobStore`: the reference `JobStore`, kept in process memory.
 *
 * It implements the contract in `store.ts` literally, so it is both the store for unit tests
 * (inject a `FakeClock`) and the yardstick the SQL stores are measured against by
 * `@jobs/conformance`. Every method runs synchronously inside its promise, so each call is one
 * atomic step: no two acquirers can interleave, which is the memory store's "SKIP LOCKED".
 * Nothing survives the process.
 */
import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from './clock.js';
import { LockLostError, StoreError } from './errors.js';
import { nextRateWindow, type RateWindow } from './rate-window.js';
import {
  afterFailure,
  afterLeaseExpiry,
  compareAcquisitionOrder,
  dueTime,
  initialState,
  keepsOutcome,
  LEASE_EXPIRED_MESSAGE,
  leaseStarts,
  readLogs,
  readSteps,
  StoreSubscribers,
  toHistoryRecord,
  writtenJob,
} from './rules.js';
import {
  type AcquireRequest,
  type CancelOutcome,
  type EnqueueOptions,
  type EnqueueResult,
  type HistorySettings,
  JOB_STATES,
  type Job,
  type JobCompletion,
  type JobFailure,
  type JobFilter,
  type JobHistoryRecord,
  type JobRef,
  type JobState,
  type JobStore,
  type LeaseRenewalRef,
  type ListHistoryRequest,
  type ListJobsRequest,
  type NewJob,
  type OverdueType,
  type QueueStatsRow,
  type RateTokenGrant,
  type RateTokenRequest,
  type RecoverResult,
  type RenewResult,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type StatsRow,
  type StoreBulk,
  type StoreCancellation,
  type StoreCapabilities,
  type StoreHistory,
  type StoreRateLimits,
  type StoreSteps,
  type StoreViews,
  type StoreWaits,
} from './store.js';

export interface MemoryJobStoreOptions {
  /** The store's clock; due times and leases are compared on it. Default: the machine's clock. */
  clock?: Clock;
}

/** A stored job plus its numeric id, so ordering by insertion needs no parsing. */
interface StoredJob {
  seq: number;
  job: Job;
}

const WAITING: ReadonlySet<JobState> = new Set<JobState>(['timer', 'async']);
const UNFINISHED_FOR_SCHEDULE: ReadonlySet<JobState> = new Set<JobState>([
  'timer',
  'async',
  'running',
]);

/**
 * An in-memory job store: fast, deterministic with a fake clock, one process only.
 *
 * @example
 * import { FakeClock, JobEngine, MemoryJobStore } from '@jobs/core';
 * const clock = new FakeClock();
 * const store = new MemoryJobStore({ clock });
 * const engine = new JobEngine({ store, clock, handlers: { hello: async () => {} } });
 */
export class MemoryJobStore implements JobStore {
  readonly name = 'memory';
  readonly capabilities: StoreCapabilities = {
    notifications: true,
    transactionalEnqueue: false,
    multiProcess: false,
    scopeLimits: true,
    keyModes: true,
    progress: true,
    startMarks: true,
    logs: true,
    timeLimits: true,
  };
  readonly cancellation: StoreCancellation = {
    cancel: (id) => this.cancel(id),
    cancelHeld: (refs) => this.cancelHeld(refs),
  };
  readonly rateLimits: StoreRateLimits = {
    takeRateTokens: (requests) => this.takeRateTokens(requests),
    deferJobs: (refs, delayMs) => this.deferJobs(refs, delayMs),
  };
  readonly history: StoreHistory = {
    configure: (settings) => this.configureHistory(settings),
    get: (id) => this.getHistory(id),
    list: (request) => this.listHistory(request),
    amend: (id, resultJson, durationMs) => this.amendHistory(id, resultJson, durationMs),
    prune: (retentionMs, limit) => this.pruneHistory(retentionMs, limit),
  };
  readonly bulk: StoreBulk = {
    countJobs: (filter, cap) => this.countJobs(filter, cap),
    retryDeadletterMany: (filter, retries, limit) =>
      this.retryDeadletterMany(filter, retries, limit),
    deleteMany: (filter, limit) => this.deleteMany(filter, limit),
  };
  readonly views: StoreViews = {
    overdueTypes: (request) => this.overdueTypes(request),
    queueStats: (options) => this.queueStats(options),
    // A map has no statistics to estimate from; readers count instead.
    estimateJobs: async () => null,
  };
  readonly steps: StoreSteps = {
    save: (ref, stepsJson, tx) => this.saveSteps(ref, stepsJson, tx),
  };
  readonly waits: StoreWaits = {
    sleep: (ref, stepsJson, delayMs) => this.sleepHeld(ref, stepsJson, delayMs),
    signal: (name, key, payloadJson) => this.signal(name, key, payloadJson),
    pruneSignals: (retentionMs, limit) => this.pruneSignals(retentionMs, limit),
    takeSignal: (ref, name, key, stepsJsonOf) => this.takeSignal(ref, name, key, stepsJsonOf),
    waitSignal: (ref, name, key, stepsJson, timeoutMs) =>
      this.waitSignal(ref, name, key, stepsJson, timeoutMs),
  };

  private readonly clock: Clock;
  private readonly jobs = new Map<number, StoredJob>();
  /** Rate-limit windows by key (see `takeRateTokens`). */
  private readonly rateWindows = new Map<string, RateWindow>();
  /** job key → id of the unfinished job holding it. */
  private readonly keys = new Map<string, number>();
  private readonly schedules = new Map<string, ScheduleRecord>();
  private readonly subscribers = new StoreSubscribers();
  /**
   * Signals not taken yet, oldest first, by `name` NUL `key` (see `StoreWaits.signal`): payload
   * and when it was sent (ms on the store's clock).
   */
  private readonly signals = new Map<string, { payload: string; at: number }[]>();
  /** Jobs waiting for a signal, by `name` NUL `key` (see `StoreWaits.waitSignal`). */
  private readonly signalWaiters = new Map<string, Set<string>>();
  /** Finished jobs, by id (see `configureHistory`). */
  private readonly finished = new Map<string, JobHistoryRecord>();
  /** Changes queued for running holders of keys (see `NewJob.keyMode`): key → holder, change. */
  private readonly followups = new Map<string, { holder: number; job: NewJob }>();
  private historySettings: HistorySettings = { keep: 'none', retentionMs: 0 };
  private nextSeq = 1;
  private closed = false;

  constructor(options: MemoryJobStoreOptions = {}) {
    this.clock = options.clock ?? systemClock;
  }

  async migrate(): Promise<void> {
    this.assertOpen('migrate');
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
  }

  async now(): Promise<Date> {
    this.assertOpen('now');
    return this.currentTime();
  }

  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    this.assertOpen('enqueue');
    if (options?.tx !== undefined && options.tx !== null) {
      throw new StoreError(
        '[@jobs/core] memory store enqueue: transactions are not supported (capabilities.transactionalEnqueue is false)',
      );
    }
    const results = this.insertJobs(jobs, this.currentTime());
    if (results.some((r) => r.created) || jobs.some((j) => (j.keyMode ?? 'keep') !== 'keep')) {
      this.notify();
    }
    return results;
  }

  async acquire(request: AcquireRequest): Promise<Job[]> {
    this.assertOpen('acquire');
    if (request.limit <= 0) return [];
    const now = this.currentTime();
    const nowMs = now.getTime();
    const types = new Set(request.types);
    const queues = request.queues ? new Set(request.queues) : null;
    const tenants = request.tenants ? new Set(request.tenants) : null;

    // Pass 1: per scope, its running limited jobs (live or lapsed lease: a lapsed one keeps its
    // slot until recovered) and its due waiting limited jobs (of any type, queue or tenant).
    const running = new Map<string, number>();
    const waiting = new Map<string, StoredJob[]>();
    for (const stored of this.jobs.values()) {
      const job = stored.job;
      if (job.scope === null || (job.scopeLimit ?? null) === null) continue;
      if (job.state === 'running') {
        running.set(job.scope, (running.get(job.scope) ?? 0) + 1);
      } else if (WAITING.has(job.state) && job.dueAt.getTime() <= nowMs) {
        const list = waiting.get(job.scope);
        if (list) list.push(stored);
        else waiting.set(job.scope, [stored]);
      }
    }
    // A limited job may start while it is among the first `limit - running` of its scope.
    const startable = new Set<StoredJob>();
    for (const [scope, list] of waiting) {
      list.sort(compareStored);
      const busy = running.get(scope) ?? 0;
      list.forEach((stored, ahead) => {
        if (busy + ahead < (stored.job.scopeLimit ?? 1)) startable.add(stored);
      });
    }

    // Pass 2: the first `limit` eligible jobs in acquisition order, kept in a small sorted
    // array instead of sorting every due job.
    const chosen: StoredJob[] = [];
    for (const stored of this.jobs.values()) {
      const job = stored.job;
      if (!WAITING.has(job.state) || job.dueAt.getTime() > nowMs) continue;
      if (!types.has(job.type)) continue;
      if (queues && !queues.has(job.queue)) continue;
      if (tenants && (job.tenantId === null || !tenants.has(job.tenantId))) continue;
      if (job.scope !== null && (job.scopeLimit ?? null) !== null && !startable.has(stored)) {
        continue;
      }
      insertBounded(chosen, stored, request.limit);
    }

    const token = randomUUID();
    const lockExpiresAt = nowMs + request.leaseMs;
    const starts = leaseStarts(request, chosen.length);
    const acquired: Job[] = [];
    chosen.forEach(({ job }, i) => {
      job.state = 'running';
      job.lockOwner = request.owner;
      job.lockExpiresAt = new Date(lockExpiresAt);
      job.lockToken = token;
      job.attempts += 1;
      job.startedAt = starts.records(i, job.retriesLeft) ? new Date(nowMs) : null;
      acquired.push(copyJob(job));
    });
    return acquired;
  }

  async complete(refs: readonly JobCompletion[]): Promise<SettleResult> {
    this.assertOpen('complete');
    // A cancel request wins while the job has not completed: its owner cancels it.
    return this.finishHeld(refs, 'completed', (job) => job.cancelRequested === true);
  }

  /**
   * Removes held jobs as finished with `outcome`, recording them in history as configured; a
   * job `refuse` keeps (a cancel request) is reported in `cancelRequested`.
   */
  private finishHeld(
    refs: readonly JobCompletion[],
    outcome: 'completed' | 'cancelled',
    refuse: (job: Job) => boolean = () => false,
  ): SettleResult {
    const lost: string[] = [];
    const cancelRequested: string[] = [];
    for (const ref of refs) {
      const stored = this.held(ref);
      if (!stored) {
        lost.push(ref.id);
        continue;
      }
      if (refuse(stored.job)) {
        cancelRequested.push(ref.id);
        continue;
      }
      this.remove(stored);
      const result = outcome === 'completed' ? ref.resultJson : null;
      this.record(stored.job, outcome, result, ref.durationMs);
    }
    return settleResult(lost, cancelRequested);
  }

  private async cancel(id: string): Promise<CancelOutcome> {
    this.assertOpen('cancel');
    const stored = this.byId(id);
    if (!stored) return this.finished.has(id) ? 'finished' : 'not-found';
    if (stored.job.state === 'running') {
      stored.job.cancelRequested = true;
      return 'requested';
    }
    this.remove(stored);
    this.record(stored.job, 'cancelled', null, null);
    return 'cancelled';
  }

  private async cancelHeld(refs: readonly JobCompletion[]): Promise<SettleResult> {
    this.assertOpen('cancelHeld');
    return this.finishHeld(refs, 'cancelled');
  }

  /** `complete(done)` then `acquire(request)` as one atomic step. */
  async completeAndAcquire(
    done: readonly JobCompletion[],
    request: AcquireRequest,
  ): Promise<SettleResult & { jobs: Job[] }> {
    const settled = await this.complete(done);
    const jobs = await this.acquire(request);
    return { ...settled, jobs };
  }

  async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    this.assertOpen('fail');
    const nowMs = this.clock.now();
    const lost: string[] = [];
    const cancelRequested: string[] = [];
    for (const failure of failures) {
      const stored = this.held(failure);
      if (!stored) {
        lost.push(failure.id);
        continue;
      }
      if (stored.job.cancelRequested) {
        // A cancel request wins: its owner cancels the job instead.
        cancelRequested.push(failure.id);
        continue;
      }
      const job = stored.job;
      const next = afterFailure(job, failure, nowMs);
      job.state = next.state;
      if (next.dueAt) job.dueAt = next.dueAt;
      job.retriesLeft = next.retriesLeft;
      job.lastError = next.lastError;
      clearLock(job);
    }
    return settleResult(lost, cancelRequested);
  }

  async release(refs: readonly JobRef[]): Promise<SettleResult> {
    this.assertOpen('release');
    const { lost, changed } = this.giveBack(refs, (job) => {
      job.state = 'async';
    });
    if (changed) this.notify();
    return { lost };
  }

  /** Held jobs back to waiting, unstarted: `change` sets their state, the attempt is not counted. */
  private giveBack(
    refs: readonly JobRef[],
    change: (job: Job) => void,
  ): { lost: string[]; changed: boolean } {
    const lost: string[] = [];
    for (const ref of refs) {
      const stored = this.held(ref);
      if (!stored) {
        lost.push(ref.id);
        continue;
      }
      change(stored.job);
      stored.job.attempts -= 1;
      clearLock(stored.job);
    }
    return { lost, changed: lost.length < refs.length };
  }

  private async takeRateTokens(requests: readonly RateTokenRequest[]): Promise<RateTokenGrant[]> {
    this.assertOpen('takeRateTokens');
    const nowMs = this.currentTime().getTime();
    return requests.map((request) => {
      const window = nextRateWindow(this.rateWindows.get(request.key) ?? null, request, nowMs);
      this.rateWindows.set(request.key, window.state);
      return { key: request.key, granted: window.granted, retryAt: window.retryAt };
    });
  }

  private async deferJobs(refs: readonly JobRef[], delayMs: number): Promise<SettleResult> {
    this.assertOpen('deferJobs');
    const due = this.currentTime().getTime() + Math.max(0, delayMs);
    const { lost } = this.giveBack(refs, (job) => {
      job.state = delayMs > 0 ? 'timer' : 'async';
      job.dueAt = new Date(due);
    });
    return { lost };
  }

  async renewLeases(
    owner: string,
    leaseMs: number,
    refs: readonly LeaseRenewalRef[],
  ): Promise<RenewResult> {
    this.assertOpen('renewLeases');
    const expires = this.clock.now() + leaseMs;
    const lost: string[] = [];
    const cancelRequested: string[] = [];
    for (const ref of refs) {
      const stored = this.held(ref);
      if (!stored || stored.job.lockOwner !== owner) {
        lost.push(ref.id);
        continue;
      }
      stored.job.lockExpiresAt = new Date(expires);
      if (ref.start === true && !stored.job.startedAt) stored.job.startedAt = this.currentTime();
      else if (ref.start === false) stored.job.startedAt = null;
      if (ref.progressJson !== undefined && ref.progressJson !== null) {
        stored.job.progress = JSON.parse(ref.progressJson);
      }
      if (ref.logsJson !== undefined && ref.logsJson !== null) {
        stored.job.logs = readLogs(ref.logsJson);
      }
      if (stored.job.cancelRequested) cancelRequested.push(ref.id);
    }
    return cancelRequested.length > 0 ? { lost, cancelRequested } : { lost };
  }

  /** See `JobStore.saveSteps`; no transactions here (`tx` is refused). */
  private async saveSteps(ref: JobRef, stepsJson: string, tx?: unknown): Promise<boolean> {
    this.assertOpen('saveSteps');
    if (tx !== undefined) {
      throw new StoreError('[@jobs/core] memory store saveSteps: transactions are not supported');
    }
    const stored = this.held(ref);
    if (!stored) return false;
    stored.job.steps = readSteps(stepsJson);
    return true;
  }

  /** See `StoreWaits.sleep`: back to `timer` with its steps, the attempt not counted. */
  private async sleepHeld(ref: JobRef, stepsJson: string, delayMs: number): Promise<boolean> {
    this.assertOpen('sleep');
    const stored = this.held(ref);
    if (!stored || stored.job.cancelRequested) return false;
    const steps = readSteps(stepsJson);
    const ms = Math.max(0, Math.round(delayMs));
    const due = this.currentTime().getTime() + ms;
    this.giveBack([ref], (job) => {
      job.state = ms > 0 ? 'timer' : 'async';
      job.dueAt = new Date(due);
      job.steps = steps;
    });
    if (ms === 0) this.notify();
    return true;
  }

  /** See `StoreWaits.signal`. */
  private async signal(name: string, key: string, payloadJson: string): Promise<void> {
    this.assertOpen('signal');
    const at = `${name}\u0000${key}`;
    const list = this.signals.get(at) ?? [];
    list.push({ payload: payloadJson, at: this.clock.now() });
    this.signals.set(at, list);
    let woke = false;
    for (const id of this.signalWaiters.get(at) ?? []) {
      const stored = this.byId(id);
      if (stored?.job.state !== 'timer') continue;
      stored.job.state = 'async';
      stored.job.dueAt = this.currentTime();
      woke = true;
    }
    if (woke) this.notify();
  }

  /** See `StoreWaits.pruneSignals`: the oldest expired signals of every name and key. */
  private async pruneSignals(retentionMs: number, limit: number): Promise<number> {
    this.assertOpen('pruneSignals');
    const before = this.clock.now() - retentionMs;
    const expired: { at: number; list: { at: number }[]; entry: { at: number } }[] = [];
    for (const list of this.signals.values()) {
      for (const entry of list) {
        if (entry.at < before) expired.push({ at: entry.at, list, entry });
      }
    }
    const pruned = expired.sort((a, b) => a.at - b.at).slice(0, limit);
    for (const { list, entry } of pruned) list.splice(list.indexOf(entry), 1);
    for (const [at, list] of this.signals) if (list.length === 0) this.signals.delete(at);
    return pruned.length;
  }

  /** See `StoreWaits.takeSignal`. */
  private async takeSignal(
    ref: JobRef,
    name: string,
    key: string,
    stepsJsonOf: (payloadJson: string | null) => string | null,
  ): Promise<string | null> {
    this.assertOpen('takeSignal');
    const at = `${name}\u0000${key}`;
    const payload = this.signals.get(at)?.[0]?.payload ?? null;
    const stepsJson = stepsJsonOf(payload);
    if (stepsJson === null) {
      if (payload === null) return null;
      throw new StoreError('[@jobs/core] takeSignal: a taken signal needs a step list to write');
    }
    const stored = this.held(ref);
    if (!stored) throw new LockLostError(ref.id);
    stored.job.steps = readSteps(stepsJson);
    if (payload !== null) {
      const list = this.signals.get(at) as { payload: string; at: number }[];
      list.shift();
      if (list.length === 0) this.signals.delete(at);
    }
    this.forgetWaits(ref.id);
    return payload;
  }

  /** See `StoreWaits.waitSignal`. */
  private async waitSignal(
    ref: JobRef,
    name: string,
    key: string,
    stepsJson: string,
    timeoutMs: number,
  ): Promise<boolean> {
    if (!(await this.sleepHeld(ref, stepsJson, timeoutMs))) return false;
    const at = `${name}\u0000${key}`;
    const waiters = this.signalWaiters.get(at) ?? new Set<string>();
    waiters.add(ref.id);
    this.signalWaiters.set(at, waiters);
    if ((this.signals.get(at)?.length ?? 0) > 0) {
      const stored = this.byId(ref.id) as StoredJob;
      stored.job.state = 'async';
      stored.job.dueAt = this.currentTime();
      this.notify();
    }
    return true;
  }

  private forgetWaits(id: string): void {
    for (const [at, waiters] of this.signalWaiters) {
      if (waiters.delete(id) && waiters.size === 0) this.signalWaiters.delete(at);
    }
  }

  async recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    this.assertOpen('recoverExpiredLeases');
    const nowMs = this.clock.now();
    const expired = [...this.jobs.values()]
      .filter(
        (s) =>
          s.job.state === 'running' &&
          s.job.lockExpiresAt !== null &&
          s.job.lockExpiresAt.getTime() <= nowMs,
      )
      .sort(
        (a, b) =>
          (a.job.lockExpiresAt?.getTime() ?? 0) - (b.job.lockExpiresAt?.getTime() ?? 0) ||
          a.seq - b.seq,
      )
      .slice(0, Math.max(0, limit));
    const result: RecoverResult = { requeued: [], deadlettered: [] };
    const released: string[] = [];
    const cancelled: string[] = [];
    for (const stored of expired) {
      const { job } = stored;
      const end = afterLeaseExpiry(job);
      if (end === 'cancelled') {
        // Its owner died before it ended the cancelled job: it ends cancelled, never retried
        // (how long it ran is not known: no duration).
        this.remove(stored);
        this.record(job, 'cancelled', null, null);
        cancelled.push(job.id);
        continue;
      }
      if (end === 'released') {
        // Leased but never started (its owner prefetched it, then died): no attempt counted.
        job.state = 'async';
        job.attempts -= 1;
        clearLock(job);
        released.push(job.id);
        continue;
      }
      if (end === 'requeued') {
        job.state = 'async';
        job.retriesLeft -= 1;
        result.requeued.push(job.id);
      } else {
        job.state = 'deadletter';
        result.deadlettered.push(job.id);
      }
      clearLock(job);
      job.lastError = { message: LEASE_EXPIRED_MESSAGE, stack: null };
    }
    if (released.length > 0) result.released = released;
    if (cancelled.length > 0) result.cancelled = cancelled;
    if (result.requeued.length > 0 || released.length > 0) this.notify();
    return result;
  }

  async nextDueAt(
    request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>,
  ): Promise<Date | null> {
    this.assertOpen('nextDueAt');
    const types = new Set(request.types);
    let min: number | null = null;
    for (const { job } of this.jobs.values()) {
      if (!WAITING.has(job.state) || !types.has(job.type)) continue;
      if (request.queues && !request.queues.includes(job.queue)) continue;
      if (request.tenants && (job.tenantId === null || !request.tenants.includes(job.tenantId))) {
        continue;
      }
      const due = job.dueAt.getTime();
      if (min === null || due < min) min = due;
    }
    return min === null ? null : new Date(min);
  }

  subscribe(listener: () => void): () => void {
    this.assertOpen('subscribe');
    return this.subscribers.add(listener);
  }

  // ---- admin ----

  async getJob(id: string): Promise<Job | null> {
    this.assertOpen('getJob');
    const stored = this.byId(id);
    return stored ? copyJob(stored.job) : null;
  }

  async listJobs(request: ListJobsRequest): Promise<Job[]> {
    this.assertOpen('listJobs');
    const after =
      request.afterId != null && /^[1-9][0-9]*$/.test(request.afterId)
        ? Number(request.afterId)
        : 0;
    const matching = [...this.jobs.values()]
      .filter((s) => s.seq > after && matchesFilter(s.job, request))
      .sort((a, b) => a.seq - b.seq);
    const offset = Math.max(0, request.offset);
    return matching.slice(offset, offset + Math.max(0, request.limit)).map((s) => copyJob(s.job));
  }

  async retryDeadletter(id: string, retries: number): Promise<Job | null> {
    this.assertOpen('retryDeadletter');
    const stored = this.byId(id);
    if (stored?.job.state !== 'deadletter') return null;
    const job = stored.job;
    job.state = 'async';
    job.dueAt = this.currentTime();
    job.retriesLeft = retries;
    // A retry starts afresh: it drops a cancel request left from a run whose owner died.
    job.cancelRequested = false;
    clearLock(job);
    this.notify();
    return copyJob(job);
  }

  async deleteJob(id: string): Promise<boolean> {
    this.assertOpen('deleteJob');
    const stored = this.byId(id);
    if (!stored) return false;
    if (stored.job.state === 'running') {
      // Its handler may still run: a cancel, so its slot stays taken until its owner lets go.
      stored.job.cancelRequested = true;
      return true;
    }
    this.remove(stored);
    if (stored.job.state === 'deadletter') this.record(stored.job, 'deadletter', null, null);
    return true;
  }

  private async countJobs(filter: JobFilter, cap = Number.POSITIVE_INFINITY): Promise<number> {
    this.assertOpen('countJobs');
    let count = 0;
    for (const { job } of this.jobs.values()) {
      if (count >= cap) break;
      if (matchesFilter(job, filter)) count += 1;
    }
    return count;
  }

  private async retryDeadletterMany(
    filter: JobFilter,
    retries: number,
    limit: number,
  ): Promise<number> {
    this.assertOpen('retryDeadletterMany');
    const ids = this.matchingIds({ ...filter, state: 'deadletter' }, limit);
    for (const id of ids) await this.retryDeadletter(id, retries);
    return ids.length;
  }

  private async deleteMany(filter: JobFilter, limit: number): Promise<number> {
    this.assertOpen('deleteMany');
    // Running jobs get a cancel request and are not counted (see `JobStore.deleteMany`).
    for (const { job } of this.jobs.values()) {
      if (job.state === 'running' && matchesFilter(job, filter)) job.cancelRequested = true;
    }
    const notRunning = (state: JobFilter['state']): JobState[] =>
      (state === undefined ? JOB_STATES : typeof state === 'string' ? [state] : state).filter(
        (s) => s !== 'running',
      );
    const states = notRunning(filter.state);
    if (states.length === 0) return 0;
    const ids = this.matchingIds({ ...filter, state: states }, limit);
    for (const id of ids) await this.deleteJob(id);
    return ids.length;
  }

  // ---- history ----

  private configureHistory(settings: HistorySettings): void {
    this.historySettings = { ...settings };
  }

  private async amendHistory(
    id: string,
    resultJson: string | null,
    durationMs: number,
  ): Promise<boolean> {
    this.assertOpen('amendHistory');
    const record = this.finished.get(id);
    if (record?.outcome !== 'completed') return false;
    record.result = resultJson === null ? null : JSON.parse(resultJson);
    record.durationMs = durationMs;
    return true;
  }

  private async getHistory(id: string): Promise<JobHistoryRecord | null> {
    this.assertOpen('getHistory');
    const record = this.finished.get(id);
    return record ? copyRecord(record) : null;
  }

  private async listHistory(request: ListHistoryRequest): Promise<JobHistoryRecord[]> {
    this.assertOpen('listHistory');
    const after = request.after ?? null;
    return [...this.finished.values()]
      .filter(
        (r) =>
          (request.type === undefined || r.type === request.type) &&
          (request.outcome === undefined || r.outcome === request.outcome) &&
          (request.since === undefined || r.finishedAt >= request.since) &&
          (request.until === undefined || r.finishedAt < request.until) &&
          (after === null || compareNewestFirst(r, after) > 0),
      )
      .sort(compareNewestFirst)
      .slice(0, Math.max(0, request.limit))
      .map(copyRecord);
  }

  private async pruneHistory(retentionMs: number, limit: number): Promise<number | null> {
    this.assertOpen('pruneHistory');
    const cutoff = this.clock.now() - retentionMs;
    const expired = [...this.finished.values()]
      .filter((r) => r.finishedAt.getTime() < cutoff)
      .sort((a, b) => -compareNewestFirst(a, b))
      .slice(0, Math.max(0, limit));
    for (const record of expired) this.finished.delete(record.id);
    return expired.length;
  }

  async suspend(filter: JobFilter): Promise<number> {
    this.assertOpen('suspend');
    let count = 0;
    for (const { job } of this.jobs.values()) {
      if (!WAITING.has(job.state) || !matchesFilter(job, filter)) continue;
      job.suspendedFrom = job.state as 'timer' | 'async';
      job.state = 'suspended';
      count += 1;
    }
    return count;
  }

  async activate(filter: JobFilter): Promise<number> {
    this.assertOpen('activate');
    let count = 0;
    for (const { job } of this.jobs.values()) {
      if (job.state !== 'suspended' || !matchesFilter(job, filter)) continue;
      job.state = job.suspendedFrom ?? 'async';
      job.suspendedFrom = null;
      count += 1;
    }
    if (count > 0) this.notify();
    return count;
  }

  async stats(): Promise<StatsRow[]> {
    this.assertOpen('stats');
    const counts = new Map<string, StatsRow>();
    for (const { job } of this.jobs.values()) {
      const key = `${job.type}\u0000${job.state}`;
      const row = counts.get(key);
      if (row) row.count += 1;
      else counts.set(key, { type: job.type, state: job.state, count: 1 });
    }
    return [...counts.values()].sort(
      (a, b) => compareStrings(a.type, b.type) || compareStrings(a.state, b.state),
    );
  }

  private async overdueTypes(request: {
    excludeTypes: readonly string[];
    dueBefore: Date;
    limit: number;
  }): Promise<OverdueType[]> {
    this.assertOpen('overdueTypes');
    const exclude = new Set(request.excludeTypes);
    const byType = new Map<string, OverdueType>();
    for (const { job } of this.jobs.values()) {
      if (job.state !== 'timer' && job.state !== 'async') continue;
      if (exclude.has(job.type) || job.dueAt.getTime() > request.dueBefore.getTime()) continue;
      const row = byType.get(job.type);
      if (!row) byType.set(job.type, { type: job.type, count: 1, oldestDueAt: job.dueAt });
      else {
        row.count += 1;
        if (job.dueAt < row.oldestDueAt) row.oldestDueAt = job.dueAt;
      }
    }
    return [...byType.values()]
      .sort((x, y) => x.oldestDueAt.getTime() - y.oldestDueAt.getTime())
      .slice(0, request.limit);
  }

  private async queueStats(options: { newest?: number } = {}): Promise<QueueStatsRow[]> {
    this.assertOpen('queueStats');
    const now = this.currentTime().getTime();
    const groups = new Map<string, QueueStatsRow>();
    let entries = [...this.jobs.values()];
    // Insertion order is id order: the newest are at the end.
    if (options.newest !== undefined && options.newest >= 0)
      entries = entries.slice(Math.max(0, entries.length - options.newest));
    for (const { job } of entries) {
      const key = `${job.queue}\u0000${job.type}\u0000${job.state}`;
      const due = job.dueAt.getTime() <= now ? 1 : 0;
      const row = groups.get(key);
      if (!row) {
        groups.set(key, {
          queue: job.queue,
          type: job.type,
          state: job.state,
          count: 1,
          due,
          oldestDueAt: job.dueAt,
        });
        continue;
      }
      row.count += 1;
      row.due += due;
      if (job.dueAt < row.oldestDueAt) row.oldestDueAt = job.dueAt;
    }
    return [...groups.values()];
  }

  // ---- schedules ----

  async saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    this.assertOpen('saveSchedule');
    const now = this.currentTime();
    const existing = this.schedules.get(request.name);
    const expected = request.expectedVersion;
    if (expected !== undefined && (existing?.version ?? null) !== expected) return null;
    const spec = cloneJson(request.spec);
    const nextAt = request.nextAt ? new Date(request.nextAt) : null;
    if (!existing) {
      const record: ScheduleRecord = {
        name: request.name,
        spec,
        nextAt,
        paused: false,
        pendingMisfire: false,
        skipped: 0,
        fired: 0,
        version: 1,
        createdAt: now,
        updatedAt: new Date(now),
      };
      this.schedules.set(request.name, record);
      return copySchedule(record);
    }
    existing.spec = spec;
    existing.nextAt = nextAt;
    existing.version += 1;
    existing.updatedAt = now;
    if (request.resetProgress) {
      existing.fired = 0;
      existing.skipped = 0;
      existing.pendingMisfire = false;
    }
    return copySchedule(existing);
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    this.assertOpen('getSchedule');
    const record = this.schedules.get(name);
    return record ? copySchedule(record) : null;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    this.assertOpen('listSchedules');
    return [...this.schedules.values()]
      .sort((a, b) => compareStrings(a.name, b.name))
      .map(copySchedule);
  }

  async deleteSchedule(name: string): Promise<boolean> {
    this.assertOpen('deleteSchedule');
    return this.schedules.delete(name);
  }

  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    this.assertOpen('setSchedulePaused');
    const record = this.schedules.get(name);
    if (!record) return null;
    record.paused = paused;
    record.version += 1;
    record.updatedAt = this.currentTime();
    return copySchedule(record);
  }

  async dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    this.assertOpen('dueSchedules');
    const nowMs = this.clock.now();
    return [...this.schedules.values()]
      .filter(
        (s) =>
          !s.paused && ((s.nextAt !== null && s.nextAt.getTime() <= nowMs) || s.pendingMisfire),
      )
      .sort(
        (a, b) =>
          (a.nextAt?.getTime() ?? Number.POSITIVE_INFINITY) -
            (b.nextAt?.getTime() ?? Number.POSITIVE_INFINITY) || compareStrings(a.name, b.name),
      )
      .slice(0, Math.max(0, limit))
      .map(copySchedule);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    this.assertOpen('fireSchedule');
    const record = this.schedules.get(fire.name);
    if (!record || record.version !== fire.version) return { status: 'conflict', jobs: [] };
    const now = this.currentTime();
    // Not due yet on this store's clock: a runner whose clock runs ahead never fires early.
    if (fire.dueAt && fire.dueAt.getTime() > now.getTime()) return { status: 'conflict', jobs: [] };
    let status: ScheduleFireResult['status'] = 'fired';
    let jobs: Job[] = [];
    const busy =
      fire.overlap !== 'allow' &&
      [...this.jobs.values()].some(
        (s) => s.job.schedule === fire.name && UNFINISHED_FOR_SCHEDULE.has(s.job.state),
      );
    if (busy && fire.overlap === 'skip') {
      record.skipped += 1;
      status = 'skipped';
    } else if (busy) {
      record.pendingMisfire = true;
      status = 'coalesced';
    } else {
      const results = this.insertJobs(fire.jobs, now);
      jobs = results.map((r) => r.job);
      record.pendingMisfire = false;
      record.fired += fire.occurrences;
      if (results.some((r) => r.created)) this.notify();
    }
    record.nextAt = fire.nextAt ? new Date(fire.nextAt) : null;
    record.version += 1;
    record.updatedAt = now;
    return { status, jobs };
  }

  // ---- internals ----

  private currentTime(): Date {
    return new Date(this.clock.now());
  }

  private assertOpen(operation: string): void {
    if (this.closed) {
      throw new StoreError(`[@jobs/core] memory store ${operation}: the store is closed`);
    }
  }

  private byId(id: string): StoredJob | undefined {
    // Ids are decimal strings of the sequence; anything else ("01", "abc") names no job.
    if (!/^[1-9][0-9]*$/.test(id)) return undefined;
    return this.jobs.get(Number(id));
  }

  /** The job if it is running under this exact token. */
  private held(ref: JobRef): StoredJob | undefined {
    const stored = this.byId(ref.id);
    if (stored?.job.state !== 'running' || stored.job.lockToken !== ref.token) {
      return undefined;
    }
    return stored;
  }

  /** Ids of up to `limit` jobs matching the filter, in id order. */
  private matchingIds(filter: JobFilter, limit: number): string[] {
    return [...this.jobs.values()]
      .filter((s) => matchesFilter(s.job, filter))
      .sort((a, b) => a.seq - b.seq)
      .slice(0, Math.max(0, limit))
      .map((s) => s.job.id);
  }

  /** Keeps a finished job in history when the settings say so. */
  private record(
    job: Job,
    outcome: JobHistoryRecord['outcome'],
    resultJson: string | null | undefined,
    durationMs: number | null | undefined,
  ): void {
    if (!keepsOutcome(this.historySettings.keep, outcome)) return;
    const finished = toHistoryRecord(job, outcome, this.currentTime(), resultJson, durationMs);
    this.finished.set(job.id, finished);
  }

  private remove(stored: StoredJob): void {
    this.jobs.delete(stored.seq);
    const key = stored.job.key;
    if (key !== null && this.keys.get(key) === stored.seq) this.keys.delete(key);
    // A change queued while it ran is enqueued now that it is gone.
    const followup = key === null ? undefined : this.followups.get(key);
    if (followup && followup.holder === stored.seq) {
      this.followups.delete(key as string);
      this.insertJobs([followup.job], this.currentTime());
      this.notify();
    }
  }

  private insertJobs(jobs: readonly NewJob[], now: Date): EnqueueResult[] {
    return jobs.map((input) => {
      const due = dueTime(input, now);
      if (input.key !== null) {
        const holder = this.keys.get(input.key);
        const existing = holder === undefined ? undefined : this.jobs.get(holder);
        if (existing) {
          const mode = input.keyMode ?? 'keep';
          const held = existing.job;
          if (mode !== 'keep' && held.state === 'running') {
            // Its handler has the payload already: the change runs after it (a follow-up).
            const earlier = this.followups.get(input.key);
            let dueMs = due.getTime();
            if (mode === 'debounce' && earlier?.job.dueAt) {
              dueMs = Math.max(dueMs, earlier.job.dueAt.getTime());
            }
            this.followups.set(input.key, {
              holder: existing.seq,
              job: {
                ...input,
                payload: cloneJson(input.payload),
                dueAt: new Date(dueMs),
                delayMs: 0,
              },
            });
            return { job: copyJob(held), created: false };
          }
          // `replace`/`debounce` change only a waiting holder (see `NewJob.keyMode`).
          if (mode !== 'keep' && WAITING.has(held.state)) {
            // It carries the latest change now: a follow-up queued while it ran is moot.
            this.followups.delete(input.key);
            held.payload = cloneJson(input.payload);
            if (mode === 'replace' || held.dueAt.getTime() < due.getTime()) {
              held.dueAt = due;
              held.state = initialState(due, now);
            }
          }
          return { job: copyJob(held), created: false };
        }
      }
      const seq = this.nextSeq++;
      const job = writtenJob(input, {
        id: String(seq),
        createdAt: now,
        dueAt: due,
      });
      this.jobs.set(seq, { seq, job });
      if (input.key !== null) this.keys.set(input.key, seq);
      return { job: copyJob(job), created: true };
    });
  }

  /**
   * Wakes subscribers once per burst of writes, after the current call has returned, as a
   * database notification arrives after commit.
   */
  private notify(): void {
    this.subscribers.wakeSoon();
  }
}

/** The acquisition order of `rules.ts` (the job's id is its `seq` as a decimal). */
function compareStored(a: StoredJob, b: StoredJob): number {
  return compareAcquisitionOrder(a.job, b.job);
}

/** Inserts `item` into `sorted` (acquisition order), keeping at most `limit` items. */
function insertBounded(sorted: StoredJob[], item: StoredJob, limit: number): void {
  const last = sorted[sorted.length - 1];
  if (sorted.length >= limit && last && compareStored(item, last) >= 0) return;
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareStored(sorted[mid] as StoredJob, item) <= 0) lo = mid + 1;
    else hi = mid;
  }
  sorted.splice(lo, 0, item);
  if (sorted.length > limit) sorted.pop();
}

/** Newest first: later `finishedAt`, then larger id. Negative when `a` comes before `b`. */
function compareNewestFirst(
  a: { finishedAt: Date; id: string },
  b: { finishedAt: Date; id: string },
): number {
  return b.finishedAt.getTime() - a.finishedAt.getTime() || Number(b.id) - Number(a.id);
}

function copyRecord(record: JobHistoryRecord): JobHistoryRecord {
  const job = copyJob({ ...record, state: 'async', suspendedFrom: null } as Job);
  return {
    ...record,
    ...job,
    state: 'finished',
    result: record.result === null ? null : structuredClone(record.result),
    finishedAt: new Date(record.finishedAt),
    lockExpiresAt: null,
    lockToken: null,
    suspendedFrom: null,
  };
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function matchesFilter(job: Job, filter: JobFilter): boolean {
  if (filter.state !== undefined) {
    const states: readonly JobState[] =
      typeof filter.state === 'string' ? [filter.state] : filter.state;
    if (!states.includes(job.state)) return false;
  }
  if (filter.type !== undefined && job.type !== filter.type) return false;
  if (filter.scope !== undefined && job.scope !== filter.scope) return false;
  if (filter.tenantId !== undefined && job.tenantId !== filter.tenantId) return false;
  if (filter.queue !== undefined && job.queue !== filter.queue) return false;
  if (filter.schedule !== undefined && job.schedule !== filter.schedule) return false;
  if (filter.key !== undefined && job.key !== filter.key) return false;
  return true;
}

function clearLock(job: Job): void {
  job.lockOwner = null;
  job.lockExpiresAt = null;
  job.lockToken = null;
  job.startedAt = null;
}

/** Stores JSON as a SQL store would: what JSON cannot carry is lost here too. */
function cloneJson(value: unknown): unknown {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value));
}

/** A copy callers may mutate without touching the store. Payloads are plain JSON. */
function copyJob(job: Job): Job {
  return {
    ...job,
    payload:
      job.payload === null || typeof job.payload !== 'object'
        ? job.payload
        : structuredClone(job.payload),
    dueAt: new Date(job.dueAt),
    lastError: job.lastError ? { ...job.lastError } : null,
    createdAt: new Date(job.createdAt),
    lockExpiresAt: job.lockExpiresAt ? new Date(job.lockExpiresAt) : null,
    startedAt: job.startedAt ? new Date(job.startedAt) : null,
    logs: job.logs
      ? job.logs.map((line) => ({ at: new Date(line.at), message: line.message }))
      : [],
    steps: job.steps
      ? job.steps.map((step) => ({
          ...step,
          at: new Date(step.at),
          result: step.result === null ? null : structuredClone(step.result),
        }))
      : [],
    retryPolicy: job.retryPolicy ? { ...job.retryPolicy } : null,
    occurrence: job.occurrence ? new Date(job.occurrence) : null,
    shard: job.shard ? { ...job.shard } : null,
    meta: job.meta ? { ...job.meta } : null,
    progress:
      job.progress === null || typeof job.progress !== 'object'
        ? job.progress
        : structuredClone(job.progress),
  };
}

function copySchedule(record: ScheduleRecord): ScheduleRecord {
  return {
    ...record,
    spec:
      record.spec === null || typeof record.spec !== 'object'
        ? record.spec
        : structuredClone(record.spec),
    nextAt: record.nextAt ? new Date(record.nextAt) : null,
    createdAt: new Date(record.createdAt),
    updatedAt: new Date(record.updatedAt),
  };
}

/** A settle's answer: `cancelRequested` only when some were refused for a cancel request. */
function settleResult(lost: string[], cancelRequested: string[]): SettleResult {
  return cancelRequested.length > 0 ? { lost, cancelRequested } : { lost };
}
