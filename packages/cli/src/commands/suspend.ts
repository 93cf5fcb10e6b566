/** `jobsctl suspend` / `jobsctl activate`: park waiting jobs matching filters, and bring them back. */
import type { JobEngine, JobFilter } from '@jobs/core';
import type { Command } from 'commander';
import {
  type App,
  describeFilter,
  type FilterOptions,
  toFilter,
  withFilterOptions,
} from '../app.js';
import { UsageError } from '../errors.js';
import { plural } from '../format.js';

const COMMANDS: readonly {
  name: 'suspend' | 'activate';
  past: 'suspended' | 'activated';
  description: string;
  example: string;
  /** Refuse to work on every job at once. */
  needsFilter: boolean;
  run(engine: JobEngine, filter: JobFilter): Promise<number>;
}[] = [
  {
    name: 'suspend',
    past: 'suspended',
    description:
      'move waiting jobs (timer, async, blocked) matching filters to suspended: never run until activated',
    example: 'jobsctl suspend --tenant acme --type sync',
    needsFilter: true,
    run: (engine, filter) => engine.admin.suspend(filter),
  },
  {
    name: 'activate',
    past: 'activated',
    description: 'return suspended jobs matching filters (all, without filters) to where they were',
    example: 'jobsctl activate --tenant acme',
    needsFilter: false,
    run: (engine, filter) => engine.admin.activate(filter),
  },
];

export function registerSuspend(program: Command, app: App): void {
  for (const definition of COMMANDS) {
    const command = program.command(definition.name).description(definition.description);
    withFilterOptions(command, false)
      .option('--json', `print a JSON object: { ${definition.past} }`)
      .addHelpText('after', `\nExample:\n  ${definition.example}`)
      .action(async (options: FilterOptions & { json?: boolean }, cmd: Command) => {
        const filter = toFilter(options);
        if (definition.needsFilter && Object.keys(filter).length === 0) {
          throw new UsageError(
            `${definition.name} needs at least one filter (--type, --queue, --scope, --tenant, --schedule)`,
          );
        }
        await app.withSession(cmd, async ({ engine }) => {
          const count = await definition.run(engine, filter);
          if (options.json) app.printJson({ [definition.past]: count });
          else app.print(`${definition.past} ${plural(count, 'job')} (${describeFilter(filter)})`);
        });
      });
  }
}
