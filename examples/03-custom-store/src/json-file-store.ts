/**
 * `JsonFileJobStore`: a complete `JobStore` on one JSON file, written to be read and copied.
 *
 * Each method is a few lines over the tables of `./json-file.ts` and says which invariant of the
 * contract (`@jobs/core` `store.ts`) it keeps. To adapt it to your database, keep the method
 * bodies as a specification and turn each into one transaction or statement of yours.
 */
import { randomUUID } from 'node:crypto';
import {
  type AcquireRequest,
  type Clock,
  dueTime,
  type EnqueueOptions,
  type EnqueueResult,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobState,
  type JobStore,
  LEASE_EXPIRED_MESSAGE,
  type ListJobsRequest,
  type NewJob,
  type RecoverResult,
  rowToJob,
  rowToSchedule,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
  systemClock,
} from '@jobs/core';
import { type JobRow, JsonFile, type Tables } from './json-file.js';

export interface JsonFileJobStoreOptions {
  /** The JSON file; created by `migrate()`. Its directory must exist. */
  filename: string;
  /** The store's clock: every due time and lease is compared on it. Default: the machine's. */
  clock?: Clock;
}

type Filter = Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>;

const isWaiting = (row: JobRow): boolean => row.state === 'timer' || row.state === 'async';

/** Acquisition order: priority descending, due time ascending, insertion order. */
const acquisitionOrder = (a: JobRow, b: JobRow): number =>
  b.priority - a.priority || a.due_at - b.due_at || a.id - b.id;

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
    skipLocked: true, // operations run one at a time, so an acquirer never waits on another's rows
    transactionalEnqueue: false, // there is no caller transaction to join
    multiProcess: false, // two processes would each overwrite the other's file
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
    return new Date(this.clock.now());
  }

  /** All jobs in one step; a key held by an unfinished row returns that row (created: false). */
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
   * Leases due jobs in acquisition order. Never hands out a running row, and lets an exclusive
   * job go only if it heads its scope and no exclusive job of the scope is running — also one
   * whose lease lapsed: its owner may still be at work until recovery requeues (and fences) it.
   */
  async acquire(request: AcquireRequest): Promise<Job[]> {
    return this.write('acquire', (t) => {
      const now = this.clock.now();
      const due = [...t.jobs.values()].filter((r) => isWaiting(r) && r.due_at <= now);
      due.sort(acquisitionOrder);
      // The head of a scope is its first due exclusive job of ANY type: order is per scope.
      const heads = new Map<string, JobRow>();
      for (const row of due) {
        if (row.exclusive && row.scope !== null && !heads.has(row.scope)) heads.set(row.scope, row);
      }
      const busyScopes = new Set<string>();
      for (const row of t.jobs.values()) {
        if (row.state === 'running' && row.exclusive && row.scope !== null) {
          busyScopes.add(row.scope);
        }
      }
      const token = randomUUID(); // one fresh token per call: (id, token) is unique per lease
      const taken: Job[] = [];
      for (const row of due) {
        if (taken.length >= request.limit) break;
        if (!matches(row, request)) continue;
        if (row.exclusive && row.scope !== null) {
          if (heads.get(row.scope) !== row || busyScopes.has(row.scope)) continue;
        }
        row.state = 'running';
        row.lock_owner = request.owner;
        row.lock_expires_at = now + request.leaseMs;
        row.lock_token = token;
        row.attempts += 1;
        taken.push(rowToJob(row));
      }
      return taken;
    });
  }

  /** Deletes rows still held with the caller's token; a stale token deletes nothing. */
  async complete(refs: readonly JobRef[]): Promise<SettleResult> {
    return this.settle('complete', refs, (t, row) => t.jobs.delete(row.id));
  }

  /** Back to `timer` after the delay with one retry fewer, or to deadletter; the lock is cleared. */
  async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    const byId = new Map(failures.map((f) => [f.id, f]));
    return this.settle('fail', failures, (_t, row) => {
      const failure = byId.get(String(row.id)) as JobFailure;
      if (failure.deadletter) {
        row.state = 'deadletter';
      } else {
        row.state = 'timer';
        row.due_at = this.clock.now() + failure.retryDelayMs;
        row.retries_left -= 1;
      }
      clearLock(row);
      row.last_error_message = failure.error.message;
      row.last_error_stack = failure.error.stack ?? null;
    });
  }

  /** Gives a job back unstarted: `async`, lock cleared, and the attempt is NOT counted. */
  async release(refs: readonly JobRef[]): Promise<SettleResult> {
    const result = await this.settle('release', refs, (_t, row) => {
      row.state = 'async';
      row.attempts -= 1;
      clearLock(row);
    });
    if (result.lost.length < refs.length) this.file.notify();
    return result;
  }

  /** Extends leases held with the token by `owner`, even if already expired (nobody took it). */
  async renewLeases(
    owner: string,
    leaseMs: number,
    refs: readonly JobRef[],
  ): Promise<SettleResult> {
    return this.write('renewLeases', (t) => {
      const expires = this.clock.now() + leaseMs;
      const lost: string[] = [];
      for (const ref of refs) {
        const row = held(t, ref);
        if (row && row.lock_owner === owner) row.lock_expires_at = expires;
        else lost.push(ref.id);
      }
      return { lost };
    });
  }

  /** Expired leases: requeued with one retry fewer, or deadlettered when none are left. */
  async recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    const result = await this.write('recoverExpiredLeases', (t) => {
      const now = this.clock.now();
      const expired = [...t.jobs.values()]
        .filter(
          (r) => r.state === 'running' && r.lock_expires_at !== null && r.lock_expires_at <= now,
        )
        .slice(0, Math.max(0, limit));
      const out: RecoverResult = { requeued: [], deadlettered: [] };
      for (const row of expired) {
        const retry = row.retries_left > 0;
        row.state = retry ? 'async' : 'deadletter';
        if (retry) row.retries_left -= 1;
        clearLock(row);
        row.last_error_message = LEASE_EXPIRED_MESSAGE;
        row.last_error_stack = null;
        (retry ? out.requeued : out.deadlettered).push(String(row.id));
      }
      return out;
    });
    if (result.requeued.length > 0) this.file.notify();
    return result;
  }

  /** The earliest due time among waiting jobs the request could acquire. */
  async nextDueAt(request: Filter): Promise<Date | null> {
    return this.read('nextDueAt', (t) => {
      let min: number | null = null;
      for (const row of t.jobs.values()) {
        if (isWaiting(row) && matches(row, request) && (min === null || row.due_at < min))
          min = row.due_at;
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
      const row = rowById(t, id);
      return row ? rowToJob(row) : null;
    });
  }

  /** Matching jobs in id order, paged. */
  async listJobs(request: ListJobsRequest): Promise<Job[]> {
    return this.read('listJobs', (t) => {
      const offset = Math.max(0, request.offset);
      return select(t, request)
        .slice(offset, offset + Math.max(0, request.limit))
        .map(rowToJob);
    });
  }

  /** Only a deadletter job moves: to `async`, due now, with fresh retries; its last error stays. */
  async retryDeadletter(id: string, retries: number): Promise<Job | null> {
    const job = await this.write('retryDeadletter', (t) => {
      const row = rowById(t, id);
      if (row?.state !== 'deadletter') return null;
      row.state = 'async';
      row.due_at = this.clock.now();
      row.retries_left = retries;
      clearLock(row);
      return rowToJob(row);
    });
    if (job) this.file.notify();
    return job;
  }

  async deleteJob(id: string): Promise<boolean> {
    return this.write('deleteJob', (t) => {
      const row = rowById(t, id);
      return row ? t.jobs.delete(row.id) : false;
    });
  }

  /** Parks waiting jobs, remembering the state each came from. */
  async suspend(filter: JobFilter): Promise<number> {
    return this.write('suspend', (t) => {
      const rows = select(t, filter).filter(isWaiting);
      for (const row of rows) {
        row.suspended_from = row.state as 'timer' | 'async';
        row.state = 'suspended';
      }
      return rows.length;
    });
  }

  /** Returns suspended jobs to the state they came from. */
  async activate(filter: JobFilter): Promise<number> {
    const count = await this.write('activate', (t) => {
      const rows = select(t, filter).filter((r) => r.state === 'suspended');
      for (const row of rows) {
        row.state = row.suspended_from ?? 'async';
        row.suspended_from = null;
      }
      return rows.length;
    });
    if (count > 0) this.file.notify();
    return count;
  }

  async stats(): Promise<StatsRow[]> {
    return this.read('stats', (t) => {
      const counts = new Map<string, StatsRow>();
      for (const row of t.jobs.values()) {
        const key = JSON.stringify([row.type, row.state]);
        const stat = counts.get(key) ?? { type: row.type, state: row.state, count: 0 };
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
      const now = this.clock.now();
      const nextAt = request.nextAt ? request.nextAt.getTime() : null;
      const spec = JSON.stringify(request.spec ?? null);
      let row = t.schedules.get(request.name);
      const expected = request.expectedVersion;
      if (expected !== undefined && (row?.version ?? null) !== expected) return null;
      if (!row) {
        row = {
          name: request.name,
          spec,
          next_at: nextAt,
          paused: false,
          pending_misfire: false,
          skipped: 0,
          fired: 0,
          version: 1,
          created_at: now,
          updated_at: now,
        };
        t.schedules.set(row.name, row);
        return rowToSchedule(row);
      }
      Object.assign(row, { spec, next_at: nextAt, version: row.version + 1, updated_at: now });
      if (request.resetProgress)
        Object.assign(row, { fired: 0, skipped: 0, pending_misfire: false });
      return rowToSchedule(row);
    });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.read('getSchedule', (t) => {
      const row = t.schedules.get(name);
      return row ? rowToSchedule(row) : null;
    });
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return this.read('listSchedules', (t) =>
      [...t.schedules.values()].sort((a, b) => compareText(a.name, b.name)).map(rowToSchedule),
    );
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return this.write('deleteSchedule', (t) => t.schedules.delete(name));
  }

  /** Every write bumps the version, so a fire that read the old one turns into a conflict. */
  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.write('setSchedulePaused', (t) => {
      const row = t.schedules.get(name);
      if (!row) return null;
      Object.assign(row, { paused, version: row.version + 1, updated_at: this.clock.now() });
      return rowToSchedule(row);
    });
  }

  /** Unpaused schedules that are due, or owe a coalesced fire, by next time. */
  async dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    return this.read('dueSchedules', (t) => {
      const now = this.clock.now();
      return [...t.schedules.values()]
        .filter((s) => !s.paused && ((s.next_at !== null && s.next_at <= now) || s.pending_misfire))
        .sort(
          (a, b) =>
            (a.next_at ?? Infinity) - (b.next_at ?? Infinity) || compareText(a.name, b.name),
        )
        .slice(0, Math.max(0, limit))
        .map(rowToSchedule);
    });
  }

  /**
   * Compare-and-set on the version, then the overlap rule, then the jobs, all in one step:
   * of two engines firing the same occurrence exactly one wins, so it creates its jobs once.
   */
  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    const result = await this.write('fireSchedule', (t): ScheduleFireResult => {
      const row = t.schedules.get(fire.name);
      if (!row || row.version !== fire.version) return { status: 'conflict', jobs: [] };
      const busy = [...t.jobs.values()].some(
        (r) => r.schedule_name === fire.name && (isWaiting(r) || r.state === 'running'),
      );
      let outcome: ScheduleFireResult = { status: 'fired', jobs: [] };
      if (busy && fire.overlap === 'skip') {
        row.skipped += 1;
        outcome = { status: 'skipped', jobs: [] };
      } else if (busy && fire.overlap === 'coalesce') {
        row.pending_misfire = true;
        outcome = { status: 'coalesced', jobs: [] };
      } else {
        outcome.jobs = this.insert(t, fire.jobs).map((r) => r.job);
        row.pending_misfire = false;
        row.fired += fire.occurrences;
      }
      row.next_at = fire.nextAt ? fire.nextAt.getTime() : null;
      row.version += 1;
      row.updated_at = this.clock.now();
      return outcome;
    });
    if (result.jobs.length > 0) this.file.notify();
    return result;
  }

  // ---- internals ----

  /** Inserts new rows (due = (dueAt ?? now) + delay; `timer` if later than now, else `async`). */
  private insert(t: Tables, jobs: readonly NewJob[]): EnqueueResult[] {
    const now = this.clock.now();
    // Unique keys, like a unique index: one scan per call, and the batch's own keys join it.
    const byKey = new Map<string, JobRow>();
    for (const row of t.jobs.values()) if (row.job_key !== null) byKey.set(row.job_key, row);
    return jobs.map((job) => {
      const holder = job.key === null ? undefined : byKey.get(job.key);
      if (holder) return { job: rowToJob(holder), created: false };
      const due = dueTime(job, new Date(now)).getTime();
      const row: JobRow = {
        id: t.nextId++,
        type: job.type,
        payload: JSON.stringify(job.payload ?? null),
        state: due > now ? 'timer' : 'async',
        priority: job.priority,
        due_at: due,
        retries_left: job.retries,
        attempts: 0,
        scope: job.scope,
        exclusive: job.exclusive,
        job_key: job.key,
        tenant_id: job.tenantId,
        queue: job.queue,
        last_error_message: null,
        last_error_stack: null,
        created_at: now,
        lock_owner: null,
        lock_expires_at: null,
        lock_token: null,
        retry_policy: job.retryPolicy ? JSON.stringify(job.retryPolicy) : null,
        suspended_from: null,
        schedule_name: job.schedule,
        occurrence: job.occurrence ? job.occurrence.getTime() : null,
        shard_index: job.shard ? job.shard.index : null,
        shard_count: job.shard ? job.shard.count : null,
        meta: job.meta ? JSON.stringify(job.meta) : null,
      };
      t.jobs.set(row.id, row);
      if (row.job_key !== null) byKey.set(row.job_key, row);
      return { job: rowToJob(row), created: true };
    });
  }

  /** Applies `change` to each row held with its ref's token; the others are reported lost. */
  private settle(
    operation: string,
    refs: readonly JobRef[],
    change: (t: Tables, row: JobRow) => void,
  ): Promise<SettleResult> {
    return this.write(operation, (t) => {
      const lost: string[] = [];
      for (const ref of refs) {
        const row = held(t, ref);
        if (row) change(t, row);
        else lost.push(ref.id);
      }
      return { lost };
    });
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

/** Ids are decimal strings of the row id; "01" or "abc" name no job. */
function rowById(t: Tables, id: string): JobRow | undefined {
  return /^[1-9][0-9]*$/.test(id) ? t.jobs.get(Number(id)) : undefined;
}

/** The row if it is running under exactly this token: the fencing check of every holder write. */
function held(t: Tables, ref: JobRef): JobRow | undefined {
  const row = rowById(t, ref.id);
  return row?.state === 'running' && row.lock_token === ref.token ? row : undefined;
}

function clearLock(row: JobRow): void {
  row.lock_owner = null;
  row.lock_expires_at = null;
  row.lock_token = null;
}

/** Type, queue and tenant filter of acquire and nextDueAt (a null list means all). */
function matches(row: JobRow, filter: Filter): boolean {
  if (!filter.types.includes(row.type)) return false;
  if (filter.queues && !filter.queues.includes(row.queue)) return false;
  return !filter.tenants || (row.tenant_id !== null && filter.tenants.includes(row.tenant_id));
}

/** The admin filter: every given field must match. Rows come back in id order. */
function select(t: Tables, filter: JobFilter): JobRow[] {
  const states: readonly JobState[] | null =
    filter.state === undefined
      ? null
      : typeof filter.state === 'string'
        ? [filter.state]
        : filter.state;
  return [...t.jobs.values()]
    .filter(
      (r) =>
        (states === null || states.includes(r.state)) &&
        (filter.type === undefined || r.type === filter.type) &&
        (filter.scope === undefined || r.scope === filter.scope) &&
        (filter.tenantId === undefined || r.tenant_id === filter.tenantId) &&
        (filter.queue === undefined || r.queue === filter.queue) &&
        (filter.schedule === undefined || r.schedule_name === filter.schedule),
    )
    .sort((a, b) => a.id - b.id);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
