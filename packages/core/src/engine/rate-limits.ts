/**
 * Rate limits (DESIGN invariant 19): a type's `rateLimit: { max, perMs, key? }` allows at most
 * `max` starts per `perMs` window per key, across every engine on the store. The windows are the
 * store's (`JobStore.takeRateTokens`, rule in `rate-window.ts`); this part asks them.
 *
 * Right after an acquisition, before anything starts: the acquired jobs of limited types take
 * starts from their keys' windows in one store call; those the windows refuse go back waiting,
 * due when their window ends (`JobStore.deferJobs`, no attempt counted), so the engine next
 * looks at them then — no hot loop, and other engines skip them until then too.
 * `ctx.rateLimited(ms)` pushes the running job's window out by `ms` and puts the job back the
 * same way when its handler returns.
 */
import { createHash } from 'node:crypto';
import { JobsError, ValidationError } from '../errors.js';
import {
  type Job,
  type JobRef,
  type JobStore,
  type RateTokenRequest,
  refOf,
  type StoreRateLimits,
} from '../store.js';
import type { RateLimit } from './types.js';
import { assertInteger, UNSTORABLE_IN_NAME } from './validate.js';

/** Longest window or push-back: a day. */
export const MAX_RATE_WINDOW_MS = 86_400_000;

/** Longest window key a store keeps (`RateTokenRequest.key`; MySQL's column holds 255). */
export const MAX_RATE_KEY_LENGTH = 255;

/**
 * The window key of `type|key` as the store keeps it: itself, or, when longer than a store
 * holds (a long type and a long key), its SHA-256 — the same on every node, so the window is
 * still shared, and the same on every store.
 */
export function windowKey(key: string): string {
  if (key.length <= MAX_RATE_KEY_LENGTH) return key;
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

/** A type's rate limit, validated. */
export interface ResolvedRateLimit {
  max: number;
  perMs: number;
  key: ((job: Job) => string) | null;
}

/** Validates `handlers.<type>.rateLimit`. */
export function resolveRateLimit(
  value: unknown,
  field: string,
  store: Pick<JobStore, 'name' | 'rateLimits'>,
): ResolvedRateLimit {
  if (typeof value !== 'object' || value === null) {
    throw new ValidationError(field, 'must be { max, perMs, key? }');
  }
  const { max, perMs, key, ...rest } = value as RateLimit;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw new ValidationError(`${field}.${unknown}`, 'unknown option (expected max, perMs, key)');
  }
  if (key !== undefined && typeof key !== 'function') {
    throw new ValidationError(`${field}.key`, 'must be a function (job) => string');
  }
  if (!store.rateLimits) {
    throw new ValidationError(
      field,
      `the ${store.name} store keeps no rate limits (it has no \`rateLimits\`)`,
    );
  }
  return {
    max: assertInteger(max, `${field}.max`, 1, 1_000_000),
    perMs: assertInteger(perMs, `${field}.perMs`, 1, MAX_RATE_WINDOW_MS),
    key: key ?? null,
  };
}

export class RateLimits {
  /** Jobs whose handler called `ctx.rateLimited(ms)`: deferred by `ms` when it returns. */
  private readonly pushedBack = new Map<string, number>();

  /**
   * @param onKeyError told when a `key` function throws or returns no usable key: the job then
   *   counts against its type's own window (`type`), so it neither escapes the limit nor holds
   *   back the batch.
   */
  constructor(
    private readonly store: JobStore,
    private readonly limits: ReadonlyMap<string, ResolvedRateLimit>,
    /** The store's clock as the engine keeps it (epoch ms): deferrals last until window ends. */
    private readonly now: () => number,
    private readonly onKeyError: (error: unknown) => void = () => {},
  ) {}

  /**
   * The store's rate-limit windows: present whenever limits are set (`resolveRateLimit`
   * refused them otherwise) or a job was deferred, so its absence here is a bug.
   */
  private windows(): StoreRateLimits {
    const windows = this.store.rateLimits;
    if (!windows) {
      throw new JobsError(
        'STORE',
        `[@jobs/core] the ${this.store.name} store has no \`rateLimits\``,
      );
    }
    return windows;
  }

  /** The window key of a limited job: its type, or `type|key` for a keyed limit. */
  private keyOf(job: Job, limit: ResolvedRateLimit): string {
    if (!limit.key) return job.type;
    try {
      const key = limit.key(job);
      if (
        typeof key !== 'string' ||
        key === '' ||
        key.length > 200 ||
        UNSTORABLE_IN_NAME.test(key)
      ) {
        throw new ValidationError(
          `handlers.${job.type}.rateLimit.key`,
          `must return a string of 1 to 200 characters without control characters or unpaired surrogates, got ${JSON.stringify(key)} for job ${job.id}`,
        );
      }
      return windowKey(`${job.type}|${key}`);
    } catch (error) {
      this.onKeyError(error);
      return job.type;
    }
  }

  /**
   * The acquired jobs that may start now, in their order; the others are deferred to their
   * window's end. On a store error, the whole batch is released (no attempt) and it throws.
   */
  async admit(jobs: Job[]): Promise<Job[]> {
    if (this.limits.size === 0) return jobs;
    const byKey = new Map<string, { request: RateTokenRequest; jobs: Job[] }>();
    try {
      for (const job of jobs) {
        const limit = this.limits.get(job.type);
        if (!limit) continue;
        const key = this.keyOf(job, limit);
        const entry = byKey.get(key);
        if (entry) {
          entry.request.want += 1;
          entry.jobs.push(job);
        } else {
          byKey.set(key, {
            request: { key, max: limit.max, perMs: limit.perMs, want: 1 },
            jobs: [job],
          });
        }
      }
      if (byKey.size === 0) return jobs;
      const entries = [...byKey.values()];
      const grants = await this.windows().takeRateTokens(entries.map((e) => e.request));
      const refused = new Set<Job>();
      const deferrals = new Map<number, JobRef[]>();
      const now = this.now();
      entries.forEach((entry, i) => {
        const grant = grants[i];
        const granted = grant?.granted ?? 0;
        const over = entry.jobs.slice(granted);
        if (over.length === 0) return;
        const delay = Math.max(1, (grant?.retryAt.getTime() ?? 0) - now);
        for (const job of over) refused.add(job);
        deferrals.set(delay, [...(deferrals.get(delay) ?? []), ...over.map(refOf)]);
      });
      for (const [delay, refs] of deferrals) {
        await this.windows().deferJobs(refs, delay);
      }
      return jobs.filter((job) => !refused.has(job));
    } catch (error) {
      // Nothing started: give the whole batch back (no attempt counted) and report the error.
      await this.store.release(jobs.map(refOf)).catch(() => undefined);
      throw error;
    }
  }

  /** `ctx.rateLimited(ms)`: pushes the job's window out and marks it to be deferred. */
  async pushBack(job: Job, delayMs: number): Promise<void> {
    const ms = assertInteger(delayMs, 'ctx.rateLimited(ms)', 1, MAX_RATE_WINDOW_MS);
    const windows = this.store.rateLimits;
    if (!windows) {
      throw new JobsError(
        'STORE',
        `[@jobs/core] ctx.rateLimited: the ${this.store.name} store cannot defer jobs (it has no \`rateLimits\`)`,
      );
    }
    this.pushedBack.set(job.id, ms);
    const limit = this.limits.get(job.type);
    if (limit) {
      await windows.takeRateTokens([
        { key: this.keyOf(job, limit), max: limit.max, perMs: limit.perMs, want: 0, blockMs: ms },
      ]);
    }
  }

  /** The push-back of a job whose handler called `ctx.rateLimited`, taken once; else null. */
  takePushBack(jobId: string): number | null {
    const ms = this.pushedBack.get(jobId);
    if (ms === undefined) return null;
    this.pushedBack.delete(jobId);
    return ms;
  }

  /** Defers a held job whose handler was rate-limited; true when its lease was still ours. */
  async defer(ref: JobRef, delayMs: number): Promise<boolean> {
    const { lost } = await this.windows().deferJobs([ref], delayMs);
    return lost.length === 0;
  }
}
