/** `jobsctl history`: finished jobs the store keeps, newest first, a page at a time (keyset cursor). */
import {
  HISTORY_OUTCOMES,
  type HistoryOutcome,
  type JobHistoryRecord,
  type ListHistoryOptions,
} from '@jobs/core';
import { type Command, InvalidArgumentError } from 'commander';
import { type App, integer } from '../app.js';
import { cell, duration, plural, relative, table } from '../format.js';

interface HistoryOptions {
  type?: string;
  outcome?: HistoryOutcome;
  since?: Date;
  until?: Date;
  limit: number;
  cursor?: string;
  json?: boolean;
}

/** `--outcome deadletter`, checked against the history outcomes. */
function parseOutcome(value: string): HistoryOutcome {
  const outcome = value.trim();
  if (!(HISTORY_OUTCOMES as readonly string[]).includes(outcome)) {
    throw new InvalidArgumentError(
      `unknown outcome ${outcome} (outcomes: ${HISTORY_OUTCOMES.join(', ')})`,
    );
  }
  return outcome as HistoryOutcome;
}

/** `--since 2025-03-01T14:00:00Z`: an ISO-8601 time (a date alone is midnight UTC). */
function parseTime(value: string): Date {
  const date = new Date(value.trim());
  if (!/^\d{4}-\d{2}-\d{2}/.test(value.trim()) || Number.isNaN(date.getTime())) {
    throw new InvalidArgumentError(`expected an ISO-8601 time such as 2025-03-01T14:00:00Z`);
  }
  return date;
}

/** The table `jobsctl history` prints. */
export function renderHistory(records: readonly JobHistoryRecord[], now: number): string {
  return table(
    ['ID', 'TYPE', 'OUTCOME', 'FINISHED', 'DURATION', 'ATTEMPTS', 'LAST ERROR'],
    records.map((record) => [
      record.id,
      cell(record.type, 30),
      record.outcome,
      relative(record.finishedAt, now),
      record.durationMs === null ? '-' : duration(record.durationMs),
      String(record.attempts),
      cell(record.lastError?.message, 50),
    ]),
    { right: [0, 4, 5] },
  );
}

export function registerHistory(program: Command, app: App): void {
  program
    .command('history')
    .description(
      'list finished jobs the store keeps (completed, deadletter, cancelled), newest first',
    )
    .option('--type <type>', 'only jobs of this type')
    .option(
      `--outcome <outcome>`,
      `only this outcome (${HISTORY_OUTCOMES.join(', ')})`,
      parseOutcome,
    )
    .option('--since <time>', 'only jobs finished at or after this ISO-8601 time', parseTime)
    .option('--until <time>', 'only jobs finished before this ISO-8601 time', parseTime)
    .option('--limit <n>', 'records per page, 1 to 1000', integer(1, 1000), 50)
    .option('--cursor <cursor>', 'the next page: the cursor the previous page printed')
    .option(
      '--json',
      'print { records, nextCursor }: records as history keeps them (times as ISO-8601 strings)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  jobsctl history --outcome deadletter --since 2025-03-01\n  jobsctl history --type send-email --limit 100 --json',
    )
    .action(async (options: HistoryOptions, cmd: Command) => {
      await app.withSession(cmd, async ({ store, engine }) => {
        const request: ListHistoryOptions = { limit: options.limit };
        if (options.type !== undefined) request.type = options.type;
        if (options.outcome !== undefined) request.outcome = options.outcome;
        if (options.since !== undefined) request.since = options.since;
        if (options.until !== undefined) request.until = options.until;
        if (options.cursor !== undefined) request.cursor = options.cursor;
        const page = await engine.admin.listHistory(request);
        if (options.json) {
          app.printJson(page);
          return;
        }
        if (page.records.length === 0) {
          app.print(
            options.cursor === undefined
              ? 'no finished jobs match (history keeps them only while the engine has history on)'
              : 'no more finished jobs',
          );
          return;
        }
        const now = (await store.now()).getTime();
        const more = page.nextCursor === null ? '' : `; next page: --cursor ${page.nextCursor}`;
        app.print(
          `${renderHistory(page.records, now)}\n\n${plural(page.records.length, 'finished job')}${more}`,
        );
      });
    });
}
