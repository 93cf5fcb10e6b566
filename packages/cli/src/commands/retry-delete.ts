/**
 * `jobsctl retry` and `jobsctl delete`: one job by id, or every job matching filters with `--all`
 * (batched, a progress bar on a terminal, `--dry-run` to count first).
 */
import { type JobEngine, type JobFilter, JobsError } from '@jobs/core';
import type { Command } from 'commander';
import {
  type App,
  describeFilter,
  type FilterOptions,
  integer,
  toFilter,
  withFilterOptions,
} from '../app.js';
import { type BulkSummary, bulk } from '../bulk.js';
import { CliError, UsageError } from '../errors.js';
import { plural } from '../format.js';

interface ActionOptions extends FilterOptions {
  all?: boolean;
  dryRun?: boolean;
  json?: boolean;
  retries?: number;
}

/** How one action works on one job; `bulk` runs it over many. */
interface Action {
  name: 'retry' | 'delete';
  past: string;
  description: string;
  all: string;
  help: string;
  /** The `--all` filter checked and completed, or a usage error. */
  checkFilter(filter: JobFilter): JobFilter;
  /** Acts on job `id` and says what it did; throws when the job does not qualify (any more). */
  act(engine: JobEngine, id: string, options: ActionOptions): Promise<string>;
}

/** Not found or not in a state the action applies to: the job changed under us, skip it. */
const skippable = (error: unknown): boolean =>
  error instanceof JobsError && (error.code === 'NOT_FOUND' || error.code === 'INVALID_STATE');

const ACTIONS: readonly Action[] = [
  {
    name: 'retry',
    past: 'retried',
    description: 'move dead-letter jobs back to async with fresh retries: one by id, or --all',
    all: 'every dead-letter job matching the filters',
    help: '\nExamples:\n  jobsctl retry 1042\n  jobsctl retry --all --state deadletter --type send-email --dry-run\n  jobsctl retry --all --type send-email',
    checkFilter(filter) {
      const states = Array.isArray(filter.state) ? filter.state : [filter.state ?? 'deadletter'];
      if (states.some((state) => state !== 'deadletter')) {
        throw new UsageError('retry: only deadletter jobs can be retried (--state deadletter)');
      }
      return { ...filter, state: 'deadletter' };
    },
    async act(engine, id, options) {
      const job = await engine.admin.retry(
        id,
        options.retries === undefined ? {} : { retries: options.retries },
      );
      return `retried job ${job.id} (${job.type}): ${job.state}, ${job.retriesLeft} retries`;
    },
  },
  {
    name: 'delete',
    past: 'deleted',
    description: 'delete jobs in any state: one by id, or --all matching filters',
    all: 'every job matching the filters (at least one filter is required)',
    help: '\nA running job that is deleted finds its lease lost: its result is not recorded.\n\nExamples:\n  jobsctl delete 1042\n  jobsctl delete --all --state deadletter --type old-report --dry-run',
    checkFilter(filter) {
      if (Object.keys(filter).length === 0) {
        throw new UsageError(
          'delete --all needs at least one filter (--state, --type, --queue, --scope, --tenant, --schedule)',
        );
      }
      return filter;
    },
    async act(engine, id) {
      // A running job is not deleted under its handler: it gets a cancel request instead.
      const running = (await engine.admin.getJob(id))?.state === 'running';
      if (!(await engine.admin.deleteJob(id))) throw new CliError(`job ${id} does not exist`);
      return running
        ? `job ${id} is running: cancel requested — it is removed (outcome cancelled) when its worker stops it`
        : `deleted job ${id}`;
    },
  },
];

/** The filter of `--all`, or null for one job by id; usage errors for mixed-up arguments. */
function selection(
  id: string | undefined,
  options: ActionOptions,
  action: Action,
): JobFilter | null {
  const filter = toFilter(options);
  if (id !== undefined && options.all) {
    throw new UsageError(`${action.name}: give a job id or --all, not both`);
  }
  if (id !== undefined) {
    if (Object.keys(filter).length > 0 || options.dryRun) {
      throw new UsageError(
        `${action.name}: filters and --dry-run go with --all, not with a job id`,
      );
    }
    return null;
  }
  if (!options.all) throw new UsageError(`${action.name}: give a job id, or --all with filters`);
  return action.checkFilter(filter);
}

function report(app: App, action: Action, summary: BulkSummary, filter: JobFilter): void {
  const what = `${plural(summary.matched, 'job')} (${describeFilter(filter)})`;
  if (summary.dryRun) {
    app.print(`would ${action.name} ${what}; nothing changed (--dry-run)`);
    return;
  }
  const skipped =
    summary.skipped > 0 ? `; ${summary.skipped} skipped (changed or gone meanwhile)` : '';
  app.print(`${action.past} ${plural(summary.done, 'job')} (${describeFilter(filter)})${skipped}`);
}

export function registerRetryDelete(program: Command, app: App): void {
  for (const action of ACTIONS) {
    const command = program
      .command(action.name)
      .description(action.description)
      .argument('[id]', 'the job id')
      .option('--all', action.all);
    withFilterOptions(command);
    if (action.name === 'retry') {
      command.option('--retries <n>', 'retries the job gets again (default 3)', integer(0, 1000));
    }
    command
      .option('--dry-run', `with --all: only count the jobs it would ${action.name}`)
      .option('--json', 'print a JSON summary: { action, matched, done, skipped, dryRun }')
      .addHelpText('after', action.help)
      .action(async (id: string | undefined, options: ActionOptions, cmd: Command) => {
        const filter = selection(id, options, action);
        await app.withSession(cmd, async ({ engine }) => {
          if (!filter) {
            const line = await action.act(engine, id as string, options);
            const summary = { action: action.name, matched: 1, done: 1, skipped: 0, dryRun: false };
            if (options.json) app.printJson(summary);
            else app.print(line);
            return;
          }
          const summary = await bulk(app.io, engine, {
            action: action.name,
            filter,
            dryRun: options.dryRun ?? false,
            act: async (jobId) => {
              try {
                await action.act(engine, jobId, options);
                return true;
              } catch (error) {
                if (skippable(error) || error instanceof CliError) return false;
                throw error;
              }
            },
          });
          if (options.json) app.printJson(summary);
          else report(app, action, summary, filter);
        });
      });
  }
}
