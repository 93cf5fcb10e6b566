/** `jobs migrate`: create or upgrade the schema; `--print-sql` prints it for a DBA instead. */
import type { Command } from 'commander';
import type { App } from '../app.js';
import { openStore } from '../connect.js';

export function registerMigrate(program: Command, app: App): void {
  program
    .command('migrate')
    .description('create or upgrade the @jobs tables (idempotent; safe while engines run)')
    .option(
      '--print-sql',
      'print the statements for a new database instead of running them (connects to nothing)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  jobs migrate --db postgres://app@db:5432/app\n  jobs migrate --db ./jobs.db\n  jobs migrate --print-sql --db mysql://root@db:3306/app > jobs-schema.sql',
    )
    .action(async (options: { printSql?: boolean }, command: Command) => {
      const target = app.resolveTarget(command);
      if (options.printSql) {
        const { store, close } = await openStore(target, 'offline');
        try {
          app.print(store.migrationSql());
        } finally {
          await close();
        }
        return;
      }
      await app.withSession(
        command,
        async ({ store }) => {
          await store.migrate();
          app.print(`${target.display}: the @jobs schema is up to date (${target.tables})`);
        },
        'create',
      );
    });
}
