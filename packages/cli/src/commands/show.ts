/**
 * `jobsctl show <id>`: every field of one job (its scope with its limit, whether a cancel was
 * requested), what it waits for when `ctx.sleep` or `ctx.waitFor` parked it, its payload and
 * latest progress as indented JSON, its log, its durable steps (`ctx.step`: name, when, how
 * long, result), its last error.
 */
import type { Job } from '@jobs/core';
import type { Command } from 'commander';
import type { App } from '../app.js';
import { CliError } from '../errors.js';
import {
  cell,
  duration,
  jobWait,
  relative,
  scopeCell,
  shellWord,
  utc,
  withScopeLimit,
} from '../format.js';

/**
 * A finished job as history keeps it: `admin.getJob` returns one for a job that left the table
 * when the store keeps history.
 */
export type FinishedJob = Omit<Job, 'state' | 'suspendedFrom'> & {
  state: 'finished';
  outcome: string;
  result: unknown;
  finishedAt: Date;
  durationMs: number | null;
  suspendedFrom: null;
};

/** What `admin.getJob` finds: the live job, or its history record. */
export type FoundJob = Job | FinishedJob;

const when = (date: Date | null, now: number): string =>
  date === null ? '-' : `${utc(date)} (${relative(date, now)})`;

const indent = (text: string): string =>
  text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');

/** `sleeps until … (ctx.sleep "cool-off")` / `for signal approval until …`, or null. */
function waitLine(job: FoundJob, now: number): string | null {
  const wait = jobWait(job, now);
  if (wait === null) return null;
  if (wait.kind === 'sleep')
    return `sleeps until ${when(wait.until, now)} (ctx.sleep "${wait.step}")`;
  const key = wait.key === null ? '<key>' : shellWord(wait.key);
  return `for signal ${wait.signal} until ${when(wait.until, now)} (ctx.waitFor "${wait.step}"; send it with jobsctl signal ${shellWord(wait.signal)} --key ${key})`;
}

export function renderJob(job: FoundJob, now: number): string {
  const finished = job.state === 'finished' ? job : null;
  const fields: [string, string][] = [
    ['type', job.type],
    [
      'state',
      finished
        ? `finished (${finished.outcome})`
        : job.suspendedFrom
          ? `${job.state} (from ${job.suspendedFrom})`
          : job.state,
    ],
    ['queue', job.queue],
    ['priority', String(job.priority)],
    ['due', when(job.dueAt, now)],
    ['attempts', String(job.attempts)],
    ['retries left', String(job.retriesLeft)],
    ['retry policy', job.retryPolicy ? JSON.stringify(job.retryPolicy) : "the engine's"],
    ['scope', scopeCell(job)],
    ['key', job.key ?? '-'],
    ['tenant', job.tenantId ?? '-'],
    ['schedule', job.schedule ?? '-'],
    ['occurrence', job.occurrence ? utc(job.occurrence) : '-'],
    ['shard', job.shard ? `${job.shard.index + 1} of ${job.shard.count}` : '-'],
    ['created', when(job.createdAt, now)],
    ['lock owner', job.lockOwner ?? '-'],
    ['lease expires', when(job.lockExpiresAt, now)],
  ];
  const wait = waitLine(job, now);
  if (wait !== null) fields.push(['waiting', wait]);
  if (job.state === 'running' && job.startedAt !== undefined) {
    // Start marks: a job leased and waiting in its owner's prefetch has not started.
    fields.push([
      'started',
      job.startedAt
        ? when(job.startedAt, now)
        : 'not yet (acquired, waiting in its owner’s prefetch)',
    ]);
  }
  if (finished?.startedAt) fields.push(['last run started', when(finished.startedAt, now)]);
  if (job.timeoutMs) fields.push(['time limit', duration(job.timeoutMs)]);
  if (!finished) fields.push(['cancel requested', job.cancelRequested ? 'yes' : 'no']);
  if (finished) {
    fields.push(
      ['finished', when(finished.finishedAt, now)],
      ['duration', finished.durationMs === null ? '-' : duration(finished.durationMs)],
    );
  }
  const width = Math.max(...fields.map(([name]) => name.length));
  const out = [
    `Job ${job.id}`,
    ...fields.map(([name, value]) => `  ${name.padEnd(width)}  ${value}`),
  ];
  out.push('', 'Payload:', indent(JSON.stringify(job.payload, null, 2) ?? 'null'));
  if (job.progress !== undefined && job.progress !== null) {
    out.push('', 'Progress:', indent(JSON.stringify(job.progress, null, 2)));
  }
  if (job.logs && job.logs.length > 0) {
    out.push(
      '',
      `Log (${job.logs.length} line${job.logs.length === 1 ? '' : 's'}):`,
      ...job.logs.map((line) => `  ${utc(line.at)}  ${line.message}`),
    );
  }
  if (job.steps && job.steps.length > 0) {
    const names = Math.max(...job.steps.map((step) => step.name.length));
    const took = job.steps.map((step) => duration(step.durationMs));
    const tookWidth = Math.max(...took.map((text) => text.length));
    out.push(
      '',
      `Steps (${job.steps.length}):`,
      ...job.steps.map(
        (step, i) =>
          `  ${utc(step.at)}  ${step.name.padEnd(names)}  ${(took[i] as string).padStart(tookWidth)}  ${cell(JSON.stringify(step.result) ?? 'null', 80)}`,
      ),
    );
  }
  if (finished) out.push('', 'Result:', indent(JSON.stringify(finished.result, null, 2) ?? 'null'));
  if (job.lastError) {
    out.push('', 'Last error:', indent(job.lastError.message));
    if (job.lastError.stack) out.push('', 'Stack:', indent(job.lastError.stack));
  } else {
    out.push('', 'Last error: none');
  }
  return out.join('\n');
}

export function registerShow(program: Command, app: App): void {
  program
    .command('show')
    .description('show one job: every field, its payload and its last error with the stack')
    .argument('<id>', 'the job id')
    .option('--json', 'print the job as a JSON object (times as ISO-8601 strings)')
    .addHelpText('after', '\nExample:\n  jobsctl show 1042 --db ./jobs.db')
    .action(async (id: string, options: { json?: boolean }, command: Command) => {
      await app.withSession(command, async ({ store, engine }) => {
        const job: FoundJob | null = await engine.admin.getJob(id);
        if (!job) {
          throw new CliError(`job ${id} does not exist (nor in history, where the store keeps it)`);
        }
        if (options.json) app.printJson(withScopeLimit(job));
        else app.print(renderJob(job, (await store.now()).getTime()));
      });
    });
}
