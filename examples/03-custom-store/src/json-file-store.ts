/**
 * `JsonFileJobStore`: a complete `JobStore` on one JSON file, written to be read and copied.
 *
 * It keeps `Job` and `ScheduleRecord` objects exactly as `@jobs/core` defines them, and applies
 * the lifecycle's rules that `@jobs/core` exports (`writtenJob`, which applies `dueTime` and
 * `initialState`; `compareAcquisitionOrder`, `afterFailure`, `afterLeaseExpiry`, `isJobId`) instead of restating them. Each
 * method is a few lines over the tables of `./json-file.ts` and says which invariant of the
 * contract (`@jobs/core` `store.ts`) it keeps. To adapt it to your database, keep the method
 * bodies as a specification and turn each into one transaction or statement of yours.
 */
import { randomUUID } from 'node:crypto';
import {
  type AcquireRequest,
  afterFailure,
  afterLeaseExpiry,
  type Clock,
  compareAcquisitionOrder,
  type EnqueueOptions,
  type EnqueueResult,
  InvalidStateError,
  isJobId,
  isWaitingState,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobState,
  type JobStore,
  LEASE_EXPIRED_MESSAGE,
  type LeaseRenewalRef,
  type ListJobsRequest,
  leaseStarts,
  type NewJob,
  type RecoverResult,
  type RenewResult,
  readLogs,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
  systemClock,
  writtenJob,
} from '@jobs/core';
import { JsonFile, type Tables } from './json-file.js';

export interface JsonFileJobStoreOptions {
  /** The JSON file; created by `migrate()`. Its directory must exist. */
  filename: string;
  /** The store's clock: every due time and lease is compared on it. Default: the machine's. */
  clock?: Clock;
}

type Filter = Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>;

/** Waiting to run: `timer` or `async` (this store keeps no `blocked` set). */
const isWaiting = (job: Job): boolean => isWaitingState(job.state);

/**
 * Jobs and schedules in one JSON file, for one process.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * const store = new JsonFileJobStore({ filename: './jobs.json' });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { hello: async () => {} } });
 */
export class JsonFileJobStore implements JobStore {
  readonly name = 'json-file';
  readonly capabilities: StoreCapabilities = {
    notifications: true, // in-process listeners, shared by every instance on the same file
    transactionalEnqueue: false, // there is no caller transaction to join
    multiProcess: false, // two processes would each overwrite the other's file
    startMarks: true, // `startedAt`: a job leased but never started costs no attempt
    progress: true, // renewals write `ctx.progress` into `Job.progress`
    logs: true, // renewals write `ctx.log` lines into `Job.logs`
    timeLimits: true, // `Job.timeoutMs` is kept with the job
  };
  readonly filename: string;
  readonly clock: Clock;
  private readonly file: JsonFile;
  private closed = false;
  private readonly subscriptions = new Set<() => void>();

  constructor(options: JsonFileJobStoreOptions) {
    this.filename = options.filename;
    this.clock = options.clock ?? systemClock;
    this.file = JsonFile.attach(options.filename);
  }

  /** Creates the file when missing and loads it; a second call changes nothing. */
  async migrate(): Promise<void> {
    await this.read('migrate', () => undefined, true);
  }

  /** Lets queued writes finish, then forgets the file (the next open reads it from disk). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const listener of this.subscriptions) this.file.listeners.delete(listener);
    await this.file.detach();
  }

  async now(): Promise<Date> {
    this.assertOpen('now');
    return this.currentTime();
  }

  /** All jobs in one step; a key held by an unfinished job returns that job (created: false). */
  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    if (options?.tx !== undefined && options.tx !== null) {
      throw new StoreError(
        '[json-file] enqueue: transactions are not supported (transactionalEnqueue is false)',
      );
    }
    const results = await this.write('enqueue', (t) => this.insert(t, jobs));
    if (results.some((r) => r.created)) this.file.notify();
    return results;
  }

  /**
   * Leases due jobs in acquisition order. Never hands out a running job, and lets an exclusive
   * job go only if it heads its scope and no exclusive job of the scope is running — also one
   * whose lease lapsed: its owner may still be at work until recovery requeues (and fences) it.
   * Which of them are marked started is `leaseStarts`'s rule: without `start` all of them;
   * with it the first `start` and `startAhead` more, only those with retries left.
   */
  async acquire(request: AcquireRequest): Promise<Job[]> {
    return this.write('acquire', (t) => {
      const now = this.currentTime();
      const due = [...t.jobs.values()].filter((j) => isWaiting(j) && j.dueAt <= now);
      due.sort(compareAcquisitionOrder);
      // The head of a scope is its first due exclusive job of ANY type: order is per scope.
      const heads = new Map<string, Job>();
      for (const job of due) {
        if (job.exclusive && job.scope !== null && !heads.has(job.scope)) heads.set(job.scope, job);
      }
      const busyScopes = new Set<string>();
      for (const job of t.jobs.values()) {
        if (job.state === 'running' && job.exclusive && job.scope !== null) {
          busyScopes.add(job.scope);
        }
      }
      const token = randomUUID(); // one fresh token per call: (id, token) is unique per lease
      const starts = leaseStarts(request, request.limit);
      const taken: Job[] = [];
      for (const job of due) {
        if (taken.length >= request.limit) break;
        if (!matches(job, request)) continue;
        if (job.exclusive && job.scope !== null) {
          if (heads.get(job.scope) !== job || busyScopes.has(job.scope)) continue;
        }
        const i = taken.length;
        job.state = 'running';
        job.lockOwner = request.owner;
        job.lockExpiresAt = new Date(now.getTime() + request.leaseMs);
        job.lockToken = token;
        job.attempts += 1;
        job.startedAt = starts.records(i, job.retriesLeft) ? now : null;
        taken.push(copy(job));
      }
      return taken;
    });
  }

  /** Deletes jobs still held with the caller's token; a stale token deletes nothing. */
  async complete(refs: readonly JobRef[]): Promise<SettleResult> {
    return this.settle('complete', refs, (t, job) => t.jobs.delete(job.id));
  }

  /** Back to `timer` after the delay with one retry fewer, or to deadletter; the lock is cleared. */
  async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    const byId = new Map(failures.map((f) => [f.id, f]));
    return this.settle('fail', failures, (_t, job) => {
      const next = afterFailure(job, byId.get(job.id) as JobFailure, this.clock.now());
      job.state = next.state;
      if (next.dueAt) job.dueAt = next.dueAt;
      job.retriesLeft = next.retriesLeft;
      job.lastError = next.lastError;
      clearLock(job);
    });
  }

  /** Gives a job back unstarted: `async`, lock cleared, and the attempt is NOT counted. */
  async release(refs: readonly JobRef[]): Promise<SettleResult> {
    const result = await this.settle('release', refs, (_t, job) => {
      job.state = 'async';
      job.attempts -= 1;
      clearLock(job);
    });
    if (result.lost.length < refs.length) this.file.notify();
    return result;
  }

  /**
   * Extends leases held with the token by `owner`, even if already expired (nobody took it),
   * and writes in the same step what each ref carries: its start mark, progress and log.
   */
  async renewLeases(
    owner: string,
    leaseMs: number,
    refs: readonly LeaseRenewalRef[],
  ): Promise<RenewResult> {
    return this.write('renewLeases', (t) => {
      const now = this.currentTime();
      const expires = new Date(now.getTime() + leaseMs);
      const lost: string[] = [];
      for (const ref of refs) {
        const job = held(t, ref);
        if (!job || job.lockOwner !== owner) {
          lost.push(ref.id);
          continue;
        }
        job.lockExpiresAt = expires;
        if (ref.start === true) job.startedAt ??= now;
        else if (ref.start === false) job.startedAt = null;
        if (ref.progressJson != null) job.progress = JSON.parse(ref.progressJson);
        if (ref.logsJson != null) job.logs = readLogs(ref.logsJson);
      }
      return { lost };
    });
  }

  /**
   * Ends lapsed leases as `afterLeaseExpiry` says: a job whose handler never started goes back
   * without costing an attempt; any other is requeued with one retry fewer, or deadlettered
   * when none are left.
   */
  async recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    const result = await this.write('recoverExpiredLeases', (t) => {
      const now = this.currentTime();
      const expired = [...t.jobs.values()]
        .filter((j) => j.state === 'running' && j.lockExpiresAt !== null && j.lockExpiresAt <= now)
        .slice(0, Math.max(0, limit));
      const out: RecoverResult = { requeued: [], deadlettered: [] };
      const released: string[] = [];
      for (const job of expired) {
        const end = afterLeaseExpiry(job);
        if (end === 'released') {
          // Leased but never started (its owner prefetched it, then died): no attempt counted.
          job.state = 'async';
          job.attempts -= 1;
          clearLock(job);
          released.push(job.id);
          continue;
        }
        // `cancelled` needs a cancel request, which this store never records (no cancellation).
        if (end === 'requeued') {
          job.state = 'async';
          job.retriesLeft -= 1;
          out.requeued.push(job.id);
        } else {
          job.state = 'deadletter';
          out.deadlettered.push(job.id);
        }
        clearLock(job);
        job.lastError = { message: LEASE_EXPIRED_MESSAGE, stack: null };
      }
      if (released.length > 0) out.released = released;
      return out;
    });
    if (result.requeued.length > 0 || (result.released?.length ?? 0) > 0) this.file.notify();
    return result;
  }

  /** The earliest due time among waiting jobs the request could acquire. */
  async nextDueAt(request: Filter): Promise<Date | null> {
    return this.read('nextDueAt', (t) => {
      let min: Date | null = null;
      for (const job of t.jobs.values()) {
        if (isWaiting(job) && matches(job, request) && (min === null || job.dueAt < min)) {
          min = job.dueAt;
        }
      }
      return min === null ? null : new Date(min);
    });
  }

  /** Wake-ups from every instance on this file (enqueue, release, recovery, retry, activate). */
  subscribe(listener: () => void): () => void {
    this.assertOpen('subscribe');
    const wrapped = (): void => listener();
    this.subscriptions.add(wrapped);
    this.file.listeners.add(wrapped);
    return () => {
      this.subscriptions.delete(wrapped);
      this.file.listeners.delete(wrapped);
    };
  }

  // ---- admin ----

  async getJob(id: string): Promise<Job | null> {
    return this.read('getJob', (t) => {
      const job = jobById(t, id);
      return job ? copy(job) : null;
    });
  }

  /** Matching jobs in id order, paged (from after `afterId`, when given). */
  async listJobs(request: ListJobsRequest): Promise<Job[]> {
    return this.read('listJobs', (t) => {
      const offset = Math.max(0, request.offset);
      const after = request.afterId != null && isJobId(request.afterId) ? request.afterId : null;
      return select(t, request)
        .filter((j) => after === null || compareIds(j.id, after) > 0)
        .slice(offset, offset + Math.max(0, request.limit))
        .map(copy);
    });
  }

  /** Only a deadletter job moves: to `async`, due now, with fresh retries; its last error stays. */
  async retryDeadletter(id: string, retries: number): Promise<Job | null> {
    const job = await this.write('retryDeadletter', (t) => {
      const found = jobById(t, id);
      if (found?.state !== 'deadletter') return null;
      found.state = 'async';
      found.dueAt = this.currentTime();
      found.retriesLeft = retries;
      clearLock(found);
      return copy(found);
    });
    if (job) this.file.notify();
    return job;
  }

  /**
   * Deletes a job that is not running. A running job's handler may still be at work, and this
   * store cannot ask it to stop (no `cancellation`), so deleting one is refused, as the
   * contract says.
   */
  async deleteJob(id: string): Promise<boolean> {
    return this.write('deleteJob', (t) => {
      const job = jobById(t, id);
      if (!job) return false;
      if (job.state === 'running') {
        throw new InvalidStateError(
          `[json-file] deleteJob: job ${id} is running; this store cannot cancel it (it has no \`cancellation\`)`,
        );
      }
      return t.jobs.delete(job.id);
    });
  }

  /** Parks waiting jobs, remembering the state each came from. */
  async suspend(filter: JobFilter): Promise<number> {
    return this.write('suspend', (t) => {
      const jobs = select(t, filter).filter(isWaiting);
      for (const job of jobs) {
        job.suspendedFrom = job.state as 'timer' | 'async';
        job.state = 'suspended';
      }
      return jobs.length;
    });
  }

  /** Returns suspended jobs to the state they came from. */
  async activate(filter: JobFilter): Promise<number> {
    const count = await this.write('activate', (t) => {
      const jobs = select(t, filter).filter((j) => j.state === 'suspended');
      for (const job of jobs) {
        job.state = job.suspendedFrom ?? 'async';
        job.suspendedFrom = null;
      }
      return jobs.length;
    });
    if (count > 0) this.file.notify();
    return count;
  }

  async stats(): Promise<StatsRow[]> {
    return this.read('stats', (t) => {
      const counts = new Map<string, StatsRow>();
      for (const job of t.jobs.values()) {
        const key = JSON.stringify([job.type, job.state]);
        const stat = counts.get(key) ?? { type: job.type, state: job.state, count: 0 };
        stat.count += 1;
        counts.set(key, stat);
      }
      return [...counts.values()].sort(
        (a, b) => compareText(a.type, b.type) || compareText(a.state, b.state),
      );
    });
  }

  // ---- schedules ----

  /**
   * Insert, or update spec and next time (version + 1) keeping `paused`; reset progress if asked.
   * With `expectedVersion` (null: create only; a number: that version only) a mismatch writes
   * nothing and returns null — checked inside the same write, so no fire can slip in between.
   */
  async saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.write('saveSchedule', (t) => {
      const now = this.currentTime();
      const nextAt = request.nextAt ? new Date(request.nextAt) : null;
      const spec = cloneJson(request.spec);
      let schedule = t.schedules.get(request.name);
      const expected = request.expectedVersion;
      if (expected !== undefined && (schedule?.version ?? null) !== expected) return null;
      if (!schedule) {
        schedule = {
          name: request.name,
          spec,
          nextAt,
          paused: false,
          pendingMisfire: false,
          skipped: 0,
          fired: 0,
          version: 1,
          createdAt: now,
          updatedAt: now,
        };
        t.schedules.set(schedule.name, schedule);
        return copy(schedule);
      }
      Object.assign(schedule, { spec, nextAt, version: schedule.version + 1, updatedAt: now });
      if (request.resetProgress) {
        Object.assign(schedule, { fired: 0, skipped: 0, pendingMisfire: false });
      }
      return copy(schedule);
    });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.read('getSchedule', (t) => {
      const schedule = t.schedules.get(name);
      return schedule ? copy(schedule) : null;
    });
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return this.read('listSchedules', (t) =>
      [...t.schedules.values()].sort((a, b) => compareText(a.name, b.name)).map(copy),
    );
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return this.write('deleteSchedule', (t) => t.schedules.delete(name));
  }

  /** Every write bumps the version, so a fire that read the old one turns into a conflict. */
  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.write('setSchedulePaused', (t) => {
      const schedule = t.schedules.get(name);
      if (!schedule) return null;
      Object.assign(schedule, {
        paused,
        version: schedule.version + 1,
        updatedAt: this.currentTime(),
      });
      return copy(schedule);
    });
  }

  /** Unpaused schedules that are due, or owe a coalesced fire, by next time. */
  async dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    return this.read('dueSchedules', (t) => {
      const now = this.currentTime();
      const at = (s: ScheduleRecord): number => s.nextAt?.getTime() ?? Number.POSITIVE_INFINITY;
      return [...t.schedules.values()]
        .filter((s) => !s.paused && ((s.nextAt !== null && s.nextAt <= now) || s.pendingMisfire))
        .sort((a, b) => at(a) - at(b) || compareText(a.name, b.name))
        .slice(0, Math.max(0, limit))
        .map(copy);
    });
  }

  /**
   * Compare-and-set on the version (and on `dueAt`, never ahead of this store's clock), then
   * the overlap rule, then the jobs, all in one step: of two engines firing the same occurrence
   * exactly one wins, so it creates its jobs once.
   */
  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    const result = await this.write('fireSchedule', (t): ScheduleFireResult => {
      const schedule = t.schedules.get(fire.name);
      if (!schedule || schedule.version !== fire.version) return { status: 'conflict', jobs: [] };
      const now = this.currentTime();
      // Not due yet on this store's clock: an engine whose clock runs ahead never fires early.
      if (fire.dueAt && fire.dueAt > now) return { status: 'conflict', jobs: [] };
      const busy = [...t.jobs.values()].some(
        (j) => j.schedule === fire.name && (isWaiting(j) || j.state === 'running'),
      );
      let outcome: ScheduleFireResult = { status: 'fired', jobs: [] };
      if (busy && fire.overlap === 'skip') {
        schedule.skipped += 1;
        outcome = { status: 'skipped', jobs: [] };
      } else if (busy && fire.overlap === 'coalesce') {
        schedule.pendingMisfire = true;
        outcome = { status: 'coalesced', jobs: [] };
      } else {
        outcome.jobs = this.insert(t, fire.jobs).map((r) => r.job);
        schedule.pendingMisfire = false;
        schedule.fired += fire.occurrences;
      }
      schedule.nextAt = fire.nextAt ? new Date(fire.nextAt) : null;
      schedule.version += 1;
      schedule.updatedAt = now;
      return outcome;
    });
    if (result.jobs.length > 0) this.file.notify();
    return result;
  }

  // ---- internals ----

  /**
   * Inserts new jobs, each as `writtenJob` builds it: due at `dueTime`, waiting in
   * `initialState` (`timer` while due later, else `async`). Payloads and other JSON values are
   * copied: the caller may change its objects afterwards, and a value JSON cannot hold (a
   * BigInt) fails here, inside the write.
   */
  private insert(t: Tables, jobs: readonly NewJob[]): EnqueueResult[] {
    const now = this.currentTime();
    // Unique keys, like a unique index: one scan per call, and the batch's own keys join it.
    const byKey = new Map<string, Job>();
    for (const job of t.jobs.values()) if (job.key !== null) byKey.set(job.key, job);
    return jobs.map((input) => {
      const holder = input.key === null ? undefined : byKey.get(input.key);
      if (holder) return { job: copy(holder), created: false };
      // No scope limits above 1 here (`scopeLimits` is not declared): the engine sends none.
      const job = writtenJob(input, { id: String(t.nextId++), createdAt: now });
      t.jobs.set(job.id, job);
      if (job.key !== null) byKey.set(job.key, job);
      return { job: copy(job), created: true };
    });
  }

  /** Applies `change` to each job held with its ref's token; the others are reported lost. */
  private settle(
    operation: string,
    refs: readonly JobRef[],
    change: (t: Tables, job: Job) => void,
  ): Promise<SettleResult> {
    return this.write(operation, (t) => {
      const lost: string[] = [];
      for (const ref of refs) {
        const job = held(t, ref);
        if (job) change(t, job);
        else lost.push(ref.id);
      }
      return { lost };
    });
  }

  private currentTime(): Date {
    return new Date(this.clock.now());
  }

  private read<T>(operation: string, fn: (t: Tables) => T, create = false): Promise<T> {
    this.assertOpen(operation);
    return this.file.run(operation, fn, false, create);
  }

  private write<T>(operation: string, fn: (t: Tables) => T): Promise<T> {
    this.assertOpen(operation);
    return this.file.run(operation, fn, true);
  }

  private assertOpen(operation: string): void {
    if (this.closed) throw new StoreError(`[json-file] ${operation}: the store is closed`);
  }
}

/** The job of a job id (`isJobId`: canonical decimals); "01" or "abc" name no job. */
function jobById(t: Tables, id: string): Job | undefined {
  return isJobId(id) ? t.jobs.get(id) : undefined;
}

/** The job if it is running under exactly this token: the fencing check of every holder write. */
function held(t: Tables, ref: JobRef): Job | undefined {
  const job = jobById(t, ref.id);
  return job?.state === 'running' && job.lockToken === ref.token ? job : undefined;
}

/** Not held any more: no owner, lease, token or start mark. */
function clearLock(job: Job): void {
  job.lockOwner = null;
  job.lockExpiresAt = null;
  job.lockToken = null;
  job.startedAt = null;
}

/**
 * A copy for the caller: the tables' objects change with later writes, and a caller changing
 * what it was given must not change the tables.
 */
function copy<T extends Job | ScheduleRecord>(value: T): T {
  return structuredClone(value);
}

/** A JSON value as it will be stored (`undefined` becomes null); throws on what JSON cannot hold. */
function cloneJson(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

/** Type, queue and tenant filter of acquire and nextDueAt (a null list means all). */
function matches(job: Job, filter: Filter): boolean {
  if (!filter.types.includes(job.type)) return false;
  if (filter.queues && !filter.queues.includes(job.queue)) return false;
  return !filter.tenants || (job.tenantId !== null && filter.tenants.includes(job.tenantId));
}

/** The admin filter: every given field must match. Jobs come back in id order. */
function select(t: Tables, filter: JobFilter): Job[] {
  const states: readonly JobState[] | null =
    filter.state === undefined
      ? null
      : typeof filter.state === 'string'
        ? [filter.state]
        : filter.state;
  return [...t.jobs.values()]
    .filter(
      (j) =>
        (states === null || states.includes(j.state)) &&
        (filter.type === undefined || j.type === filter.type) &&
        (filter.scope === undefined || j.scope === filter.scope) &&
        (filter.tenantId === undefined || j.tenantId === filter.tenantId) &&
        (filter.queue === undefined || j.queue === filter.queue) &&
        (filter.schedule === undefined || j.schedule === filter.schedule) &&
        (filter.key === undefined || j.key === filter.key),
    )
    .sort((a, b) => compareIds(a.id, b.id));
}

/** Id order: ids are canonical decimals, so the shorter is smaller, else they compare as text. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || compareText(a, b);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
