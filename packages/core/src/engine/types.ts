import type { Clock } from '../clock.js';
import type { Job, JobError, JobStore, RetryPolicy } from '../store.js';

/** What a handler gets besides the job. */
export interface JobContext {
  /** Aborted when the lease is lost, or when `stop()` times out. Pass it to fetch, child processes… */
  signal: AbortSignal;
  /** 1 for the first attempt. */
  attempt: number;
  /** For jobs created by a schedule: the fire time of the occurrence. */
  occurrence: Date | null;
  /** For sharded schedules: this job's shard. */
  shard: { index: number; count: number } | null;
  /** The engine's logger. */
  log: Logger;
}

// biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
export type JobHandler<P = any> = (job: Job<P>, ctx: JobContext) => unknown | Promise<unknown>;

/** A handler with per-type options. */
export interface HandlerDefinition<P = unknown> {
  handler: JobHandler<P>;
  /** Retry policy for this type (default: the engine's). */
  retry?: RetryPolicy | string;
  /** Default retries for jobs of this type enqueued without `retries`. */
  retries?: number;
}

export interface Logger {
  debug(message: string, data?: Record<string, unknown>): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
}

export interface EngineOptions {
  store: JobStore;
  /** Job type → handler. An engine without handlers is a client: it enqueues and administers. */
  // biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
  handlers?: Record<string, JobHandler<any> | HandlerDefinition<any>>;
  /** Jobs running at once in this engine. Default 10. */
  concurrency?: number;
  /** Jobs leased beyond `concurrency`, waiting in memory to start. Default = concurrency. */
  prefetch?: number;
  /** Lease length; renewed every `leaseMs / 3` while jobs are held. Default 30 000. */
  leaseMs?: number;
  /** Upper bound of the idle polling delay (fallback when no wake-up arrives). Default 5 000. */
  pollIntervalMs?: number;
  /** Only jobs of these queues (default: all). */
  queues?: string[];
  /** Only jobs of these tenants (default: all). */
  tenants?: string[];
  /** Default retry policy. Default: exponential from 1 s, factor 2, cap 10 min, jitter 0.2. */
  retry?: RetryPolicy | string;
  /** Default retries of a job. Default 3, like Flowable. */
  retries?: number;
  /** Largest payload accepted, in bytes of JSON. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Unique name of this engine instance (lock owner). Default: host-pid-random. */
  owner?: string;
  /** Clock used for timeouts and schedule arithmetic; default is kept in sync with the store. */
  clock?: Clock;
  logger?: Logger;
}

export interface EnqueueJobOptions {
  /** Absolute due time. */
  runAt?: Date;
  /** Due after this many ms (from the store's now). */
  delayMs?: number;
  /** Failed attempts allowed before deadletter. Default: the type's or engine's (3). */
  retries?: number;
  /** Per-job retry policy (`'R5/PT10M'` also sets retries to 5). */
  retry?: RetryPolicy | string;
  /** Higher runs first. Default 0. */
  priority?: number;
  scope?: string;
  /** At most one exclusive job per scope runs at a time. Needs `scope`. */
  exclusive?: boolean;
  /** While an unfinished job holds this key, enqueue returns it instead of creating another. */
  key?: string;
  tenantId?: string;
  /** Default `'default'`. */
  queue?: string;
  /** The caller's open transaction (pg client, mysql2 connection, better-sqlite3 db, EntityManager). */
  tx?: unknown;
}

export interface EngineEvents {
  enqueued: { job: Job; created: boolean };
  acquired: { jobs: Job[] };
  'timer-fired': { job: Job };
  started: { job: Job };
  completed: { job: Job; durationMs: number };
  failed: { job: Job; error: JobError; willRetry: boolean; retryDelayMs: number };
  retried: { job: Job };
  deadlettered: { job: Job; error: JobError };
  'lease-lost': { job: Job };
  released: { jobs: Job[] };
  'leases-recovered': { requeued: string[]; deadlettered: string[] };
  'schedule-fired': { schedule: string; occurrence: Date; status: string; jobs: Job[] };
  error: { error: unknown; during: string };
}

export type EngineEventName = keyof EngineEvents;
