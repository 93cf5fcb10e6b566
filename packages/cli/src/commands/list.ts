/** `jobsctl list`: jobs matching filters, a page at a time, as a table or JSON. */
import type { Job } from '@jobs/core';
import type { Command } from 'commander';
import { type App, type FilterOptions, integer, toFilter, withFilterOptions } from '../app.js';
import { cell, plural, relative, scopeCell, table, withScopeLimit } from '../format.js';

interface ListOptions extends FilterOptions {
  limit: number;
  offset: number;
  json?: boolean;
}

/** The table `jobsctl list` prints. */
export function renderJobs(jobs: readonly Job[], now: number): string {
  return table(
    ['ID', 'TYPE', 'STATE', 'QUEUE', 'DUE', 'ATTEMPTS', 'RETRIES LEFT', 'SCOPE', 'LAST ERROR'],
    jobs.map((job) => [
      job.id,
      cell(job.type, 30),
      job.state,
      cell(job.queue, 20),
      relative(job.dueAt, now),
      String(job.attempts),
      String(job.retriesLeft),
      scopeCell(job, 20),
      cell(job.lastError?.message, 50),
    ]),
    { right: [0, 5, 6] },
  );
}

export function registerList(program: Command, app: App): void {
  const command = program
    .command('list')
    .description('list jobs matching filters, oldest first (by id), a page at a time');
  withFilterOptions(command)
    .option('--limit <n>', 'jobs per page, 1 to 1000', integer(1, 1000), 50)
    .option('--offset <n>', 'jobs to skip', integer(0, Number.MAX_SAFE_INTEGER), 0)
    .option('--json', 'print a JSON array of jobs (times as ISO-8601 strings)')
    .addHelpText(
      'after',
      '\nExamples:\n  jobsctl list --state deadletter --type send-email\n  jobsctl list --queue reports --limit 100 --offset 100 --json',
    )
    .action(async (options: ListOptions, cmd: Command) => {
      await app.withSession(cmd, async ({ store, engine }) => {
        const jobs = await engine.admin.listJobs({
          ...toFilter(options),
          limit: options.limit,
          offset: options.offset,
        });
        if (options.json) {
          app.printJson(jobs.map(withScopeLimit));
          return;
        }
        if (jobs.length === 0) {
          app.print(options.offset > 0 ? `no jobs at offset ${options.offset}` : 'no jobs match');
          return;
        }
        const now = (await store.now()).getTime();
        const from = options.offset + 1;
        const to = options.offset + jobs.length;
        const more = jobs.length === options.limit ? `; next page: --offset ${to}` : '';
        app.print(
          `${renderJobs(jobs, now)}\n\n${plural(jobs.length, 'job')} (${from}–${to})${more}`,
        );
      });
    });
}
