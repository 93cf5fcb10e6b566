/**
 * `jobsctl cancel <id>`: cancels one job. A job that is not running is removed at once (history
 * outcome `cancelled`); a running one is flagged, and its owner stops it at its next lease
 * renewal (its `ctx.signal` aborts with a `CancelledError`). A job that already finished says so.
 */
import type { Command } from 'commander';
import type { App } from '../app.js';
import { CliError } from '../errors.js';

export function registerCancel(program: Command, app: App): void {
  program
    .command('cancel')
    .description(
      'cancel a job: a waiting one is removed at once, a running one is stopped by its owner',
    )
    .argument('<id>', 'the job id')
    .option('--json', 'print { id, type, outcome } (outcome: cancelled | requested)')
    .addHelpText(
      'after',
      "\nA running job's owner learns of the cancel from its next lease renewal (every leaseMs / 3)\nand ends it cancelled; it is never retried. A job whose completion committed first stays\ncompleted.\n\nExample:\n  jobsctl cancel 1042 --db ./jobs.db",
    )
    .action(async (id: string, options: { json?: boolean }, command: Command) => {
      await app.withSession(command, async ({ engine }) => {
        const before = await engine.admin.getJob(id);
        const outcome = await engine.admin.cancel(id);
        const type = before?.type ?? null;
        if (outcome === 'finished') {
          const ended = before?.state === 'finished' ? ` (${before.outcome})` : '';
          throw new CliError(`job ${id} already finished${ended}: nothing to cancel`);
        }
        if (options.json) {
          app.printJson({ id, type, outcome });
          return;
        }
        const what = `job ${id}${type ? ` (${type})` : ''}`;
        if (outcome === 'cancelled') {
          app.print(`cancelled ${what}: removed${before ? ` from ${before.state}` : ''}`);
        } else {
          const owner = before?.lockOwner ? ` on ${before.lockOwner}` : '';
          app.print(
            `cancel requested for ${what}: it is running${owner}; its owner stops it at its next lease renewal`,
          );
        }
      });
    });
}
