/**
 * `jobsctl status`: counts per queue, type and state; the oldest waiting job's age; running jobs
 * per owner with their lease expiry; types waiting over a minute that nobody takes.
 */
import { isWaitingState, JOB_STATES, type JobState } from '@jobs/core';
import type { Command } from 'commander';
import type { App } from '../app.js';
import type { Session } from '../connect.js';
import { cell, duration, relative, table, utc } from '../format.js';
import { listAll } from '../paging.js';

/** Jobs of one queue and type (`status --json` → `queues[]`). */
export interface QueueStatus {
  queue: string;
  type: string;
  counts: Record<JobState, number>;
  /** Waiting jobs (`timer`, `async`) due now: the backlog. Blocked jobs are not in it. */
  due: number;
  /** Due time of the oldest of them; null when none is due. */
  oldestDueAt: string | null;
}

/** Running jobs of one owner (`status --json` → `owners[]`). */
export interface OwnerStatus {
  owner: string;
  running: number;
  /** Earliest and latest lease expiry among them. */
  leaseExpiresFirst: string;
  leaseExpiresLast: string;
  /** Leases already past: the owner stopped renewing (crashed?); recovery requeues them. */
  expired: number;
}

/** What `jobsctl status --json` prints. */
export interface StatusReport {
  database: string;
  store: string;
  /** The store's clock when the status was read. */
  now: string;
  total: number;
  byState: Record<JobState, number>;
  queues: QueueStatus[];
  oldestWaiting: { queue: string; type: string; dueAt: string; ageMs: number } | null;
  owners: OwnerStatus[];
  /** Types with jobs due over a minute ago and still waiting, oldest first. */
  overdue: { type: string; count: number; oldestDueAt: string; ageMs: number }[];
}

const zero = (): Record<JobState, number> =>
  Object.fromEntries(JOB_STATES.map((state) => [state, 0])) as Record<JobState, number>;

export async function readStatus({ store, engine, target }: Session): Promise<StatusReport> {
  const now = (await store.now()).getTime();
  const stats = await engine.admin.stats();
  const rows = await store.views.queueStats();
  const running = await listAll(engine, { state: 'running' }, (job) => job);

  const queues = new Map<string, QueueStatus & { oldest: number | null }>();
  let oldestWaiting: StatusReport['oldestWaiting'] = null;
  for (const row of rows) {
    const key = `${row.queue}\u0000${row.type}`;
    const entry = queues.get(key) ?? {
      queue: row.queue,
      type: row.type,
      counts: zero(),
      due: 0,
      oldestDueAt: null,
      oldest: null,
    };
    entry.counts[row.state] += row.count;
    if (isWaitingState(row.state) && row.due > 0) {
      const due = row.oldestDueAt.getTime();
      // Blocked jobs wait for a slot of their scope, not for a worker: not the backlog.
      if (row.state !== 'blocked') {
        entry.due += row.due;
        if (entry.oldest === null || due < entry.oldest) entry.oldest = due;
      }
      if (oldestWaiting === null || due < Date.parse(oldestWaiting.dueAt)) {
        oldestWaiting = {
          queue: row.queue,
          type: row.type,
          dueAt: row.oldestDueAt.toISOString(),
          ageMs: Math.max(0, now - due),
        };
      }
    }
    queues.set(key, entry);
  }

  const owners = new Map<string, OwnerStatus & { first: number; last: number }>();
  for (const job of running) {
    const owner = job.lockOwner ?? '(none)';
    const expires = job.lockExpiresAt?.getTime() ?? now;
    const entry = owners.get(owner) ?? {
      owner,
      running: 0,
      leaseExpiresFirst: '',
      leaseExpiresLast: '',
      expired: 0,
      first: expires,
      last: expires,
    };
    entry.running += 1;
    entry.first = Math.min(entry.first, expires);
    entry.last = Math.max(entry.last, expires);
    if (expires <= now) entry.expired += 1;
    owners.set(owner, entry);
  }

  return {
    database: target.display,
    store: store.name,
    now: new Date(now).toISOString(),
    total: stats.total,
    byState: stats.byState,
    queues: [...queues.values()]
      .sort((a, b) => a.queue.localeCompare(b.queue) || a.type.localeCompare(b.type))
      .map(({ oldest, ...entry }) => ({
        ...entry,
        oldestDueAt: oldest === null ? null : new Date(oldest).toISOString(),
      })),
    oldestWaiting,
    owners: [...owners.values()]
      .sort((a, b) => a.owner.localeCompare(b.owner))
      .map(({ first, last, ...entry }) => ({
        ...entry,
        leaseExpiresFirst: new Date(first).toISOString(),
        leaseExpiresLast: new Date(last).toISOString(),
      })),
    overdue: stats.unhandled.map((row) => ({
      type: row.type,
      count: row.count,
      oldestDueAt: row.oldestDueAt.toISOString(),
      ageMs: Math.max(0, now - row.oldestDueAt.getTime()),
    })),
  };
}

export function renderStatus(report: StatusReport, tables: string): string {
  const now = Date.parse(report.now);
  const out: string[] = [`${report.database} (${tables}) at ${utc(new Date(now))}`, ''];
  const states = JOB_STATES.map((state) => `${state} ${report.byState[state]}`).join(', ');
  out.push(`Jobs: ${report.total} (${states})`);
  const oldest = report.oldestWaiting;
  out.push(
    oldest
      ? `Oldest waiting job: due ${duration(oldest.ageMs)} ago (queue ${oldest.queue}, type ${oldest.type})`
      : 'Oldest waiting job: none waiting',
  );
  if (report.queues.length > 0) {
    out.push(
      '',
      table(
        ['QUEUE', 'TYPE', ...JOB_STATES.map((s) => s.toUpperCase()), 'DUE', 'OLDEST DUE'],
        report.queues.map((q) => [
          cell(q.queue),
          cell(q.type),
          ...JOB_STATES.map((state) => String(q.counts[state])),
          String(q.due),
          q.oldestDueAt === null ? '-' : relative(new Date(q.oldestDueAt), now),
        ]),
        { right: [2, 3, 4, 5, 6, 7] },
      ),
    );
  }
  out.push('', `Running by owner: ${report.owners.length === 0 ? 'none' : ''}`.trimEnd());
  if (report.owners.length > 0) {
    out.push(
      table(
        ['OWNER', 'JOBS', 'LEASES EXPIRE', 'EXPIRED'],
        report.owners.map((o) => {
          const first = relative(new Date(o.leaseExpiresFirst), now);
          const last = relative(new Date(o.leaseExpiresLast), now);
          return [
            cell(o.owner, 60),
            String(o.running),
            first === last ? first : `${first} … ${last}`,
            String(o.expired),
          ];
        }),
        { right: [1, 3] },
      ),
    );
    if (report.owners.some((o) => o.expired > 0)) {
      out.push(
        'Expired leases: that owner stopped renewing (crashed?); a running engine requeues them.',
      );
    }
  }
  if (report.overdue.length > 0) {
    out.push(
      '',
      'Waiting over a minute (is a worker for these types running, and keeping up?):',
      table(
        ['TYPE', 'JOBS', 'OLDEST DUE'],
        report.overdue.map((o) => [cell(o.type), String(o.count), `${duration(o.ageMs)} ago`]),
        { right: [1] },
      ),
    );
  }
  return out.join('\n');
}

export function registerStatus(program: Command, app: App): void {
  program
    .command('status')
    .description(
      'counts per queue, type and state; oldest waiting job; running jobs per owner; overdue types',
    )
    .option('--json', 'print a JSON object (see the README for its fields)')
    .addHelpText('after', '\nExample:\n  jobsctl status --db postgres://app@db:5432/app')
    .action(async (options: { json?: boolean }, command: Command) => {
      await app.withSession(command, async (session) => {
        const report = await readStatus(session);
        if (options.json) app.printJson(report);
        else app.print(renderStatus(report, session.target.tables));
      });
    });
}
