/**
 * `jobsctl tail`: live lines as jobs start, finish, fail and go to the dead-letter area, until
 * Ctrl-C. It works on every store without notifications: each `--interval` it reads the running
 * jobs and compares them with the previous read. A job that left `running` is looked up: gone
 * or in history means finished (completed, or deleted by an operator), `timer` means failed with a retry
 * ahead, `deadletter` means failed for good, `async` means given back (released at shutdown,
 * or its lease expired). A job that starts and ends between two reads is not seen by itself;
 * the `counts` line, printed when the counts per state change, accounts for it.
 */
import { JOB_STATES, type Job, type JobFilter, type JobState } from '@jobs/core';
import type { Command } from 'commander';
import { type App, integer } from '../app.js';
import type { Session } from '../connect.js';
import { explain } from '../explain.js';
import { cell, duration, relative } from '../format.js';
import { listAll } from '../paging.js';
import type { FoundJob } from './show.js';

/** The job in a tail event. */
export interface TailJob {
  id: string;
  type: string;
  queue: string;
  attempt: number;
  owner: string | null;
}

/** One line of `jobsctl tail --json` (newline-delimited JSON). */
export type TailEvent =
  | { event: 'watching'; at: string; running: number; byState: Record<JobState, number> }
  | { event: 'started'; at: string; job: TailJob; leaseExpiresAt: string | null }
  | {
      event: 'finished';
      at: string;
      job: TailJob;
      /** From history (`completed`, `cancelled`); null when the store keeps none. */
      outcome: string | null;
      durationMs: number | null;
    }
  | { event: 'failed'; at: string; job: TailJob; error: string | null; retryAt: string }
  | { event: 'deadlettered'; at: string; job: TailJob; error: string | null }
  | { event: 'requeued'; at: string; job: TailJob; reason: 'released' | 'lease expired' }
  | { event: 'counts'; at: string; total: number; byState: Record<JobState, number> };

interface TailOptions {
  interval: number;
  type?: string;
  queue?: string;
  json?: boolean;
}

const summary = (job: Job): TailJob => ({
  id: job.id,
  type: job.type,
  queue: job.queue,
  attempt: job.attempts,
  owner: job.lockOwner,
});

/**
 * What became of a job that was running at the last read and is not now: `after` is its row,
 * its history record, or null (gone: completed, or deleted by an operator).
 */
function ended(before: Job, after: FoundJob | null, at: string): TailEvent | null {
  const job = summary(before);
  if (after === null) return { event: 'finished', at, job, outcome: null, durationMs: null };
  const error = after.lastError?.message ?? null;
  if (after.state === 'finished') {
    return after.outcome === 'deadletter'
      ? { event: 'deadlettered', at, job, error }
      : { event: 'finished', at, job, outcome: after.outcome, durationMs: after.durationMs };
  }
  switch (after.state) {
    case 'timer':
      return { event: 'failed', at, job, error, retryAt: after.dueAt.toISOString() };
    case 'deadletter':
      return { event: 'deadlettered', at, job, error };
    case 'async':
    case 'blocked':
    case 'suspended':
      // Lease recovery spends a retry; a release gives the attempt back.
      return {
        event: 'requeued',
        at,
        job,
        reason: after.retriesLeft < before.retriesLeft ? 'lease expired' : 'released',
      };
    default:
      return null; // running again under a new lease: the next read reports it as started
  }
}

function countsText(byState: Record<JobState, number>): string {
  return JOB_STATES.map((state) => `${state} ${byState[state]}`).join(', ');
}

/** One event as a line of text. */
export function renderEvent(event: TailEvent): string {
  const time = new Date(event.at).toTimeString().slice(0, 8);
  const head = (name: string, job: TailJob): string =>
    `${time}  ${name.padEnd(12)}  job ${job.id} ${cell(job.type, 40)} (queue ${cell(job.queue, 30)})`;
  switch (event.event) {
    case 'watching':
      return `${time}  watching      ${event.running} running; ${countsText(event.byState)} (Ctrl-C to stop)`;
    case 'started':
      return `${head('started', event.job)} attempt ${event.job.attempt} on ${event.job.owner ?? '?'}`;
    case 'finished': {
      const took = event.durationMs === null ? '' : ` in ${duration(event.durationMs)}`;
      return `${head('finished', event.job)}${event.outcome === null ? '' : `: ${event.outcome}${took}`}`;
    }
    case 'failed':
      return `${head('failed', event.job)} attempt ${event.job.attempt}: ${cell(event.error, 80)}; retry ${relative(new Date(event.retryAt), Date.parse(event.at))}`;
    case 'deadlettered':
      return `${head('deadlettered', event.job)} attempt ${event.job.attempt}: ${cell(event.error, 80)}`;
    case 'requeued':
      return `${head('requeued', event.job)}: ${event.reason}`;
    case 'counts':
      return `${time}  counts        ${countsText(event.byState)} (total ${event.total})`;
  }
}

async function counts(
  session: Session,
): Promise<{ total: number; byState: Record<JobState, number> }> {
  const stats = await session.engine.admin.stats();
  return { total: stats.total, byState: stats.byState };
}

/** Reads, compares and prints until `signal` aborts. */
async function tail(
  app: App,
  session: Session,
  options: TailOptions,
  signal: AbortSignal,
): Promise<void> {
  const emit = (event: TailEvent): void => {
    app.print(options.json ? JSON.stringify(event) : renderEvent(event));
  };
  const filter: JobFilter = { state: 'running' };
  if (options.type !== undefined) filter.type = options.type;
  if (options.queue !== undefined) filter.queue = options.queue;
  const readRunning = async (): Promise<Map<string, Job>> =>
    new Map((await listAll(session.engine, filter, (job) => job)).map((job) => [job.id, job]));

  // The first read fails the command (wrong database, no schema); later ones are retried.
  let running = await readRunning();
  let last = await counts(session);
  emit({
    event: 'watching',
    at: new Date().toISOString(),
    running: running.size,
    byState: last.byState,
  });
  let failing = false;
  while (!signal.aborted) {
    await sleep(options.interval, signal);
    if (signal.aborted) break;
    try {
      const now = await readRunning();
      const at = new Date().toISOString();
      for (const job of now.values()) {
        const before = running.get(job.id);
        if (before && before.lockToken !== job.lockToken && job.attempts > before.attempts) {
          // Failed and started again between two reads: the failure shows in the new row.
          const error = job.lastError?.message ?? null;
          emit({
            event: 'failed',
            at,
            job: summary(before),
            error,
            retryAt: job.dueAt.toISOString(),
          });
        }
        if (!before || before.lockToken !== job.lockToken) {
          emit({
            event: 'started',
            at,
            job: summary(job),
            leaseExpiresAt: job.lockExpiresAt?.toISOString() ?? null,
          });
        }
      }
      for (const [id, before] of running) {
        if (now.has(id)) continue;
        const event = ended(before, await session.engine.admin.getJob(id), at);
        if (event) emit(event);
      }
      running = now;
      const next = await counts(session);
      if (JOB_STATES.some((state) => next.byState[state] !== last.byState[state])) {
        emit({ event: 'counts', at, ...next });
      }
      last = next;
      if (failing) app.io.err('jobsctl: tail: reading works again\n');
      failing = false;
    } catch (error) {
      // Said once per streak; the next read tries again.
      if (!failing) app.io.err(`jobsctl: tail: ${explain(error, session.target)} (retrying)\n`);
      failing = true;
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}

export function registerTail(program: Command, app: App): void {
  program
    .command('tail')
    .description(
      'print jobs as they start, finish, fail and go to the dead-letter area (Ctrl-C stops)',
    )
    .option('--interval <ms>', 'how often to look, in milliseconds', integer(100, 3_600_000), 1000)
    .option('--type <type>', 'only jobs of this type')
    .option('--queue <queue>', 'only jobs in this queue')
    .option('--json', 'print one JSON object per line (see the README for the events)')
    .addHelpText(
      'after',
      '\nIt compares the running jobs every --interval: a job that starts and ends between two\nlooks shows only in the counts line. Finished means gone from the table: completed, or\ndeleted by an operator.\n\nExample:\n  jobsctl tail --db postgres://app@db:5432/app --type send-email',
    )
    .action(async (options: TailOptions, cmd: Command) => {
      const stop = new AbortController();
      const onSignal = (): void => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        await app.withSession(cmd, (session) => tail(app, session, options, stop.signal));
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}
