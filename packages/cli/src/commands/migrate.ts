/** `jobsctl migrate`: create or upgrade the schema; `--print-sql` prints it for a DBA instead. */
import type { Command } from 'commander';
import type { App } from '../app.js';
import { openStore } from '../connect.js';

/** `1–8`, or `7, 8` / `3` when not a run of three or more. */
function versions(applied: readonly number[]): string {
  const first = applied[0] as number;
  const last = applied[applied.length - 1] as number;
  const run = applied.length >= 3 && last - first === applied.length - 1;
  return run ? `${first}–${last}` : applied.join(', ');
}

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
      '\nExamples:\n  jobsctl migrate --db postgres://app@db:5432/app\n  jobsctl migrate --db ./jobs.db\n  jobsctl migrate --print-sql --db mysql://root@db:3306/app > jobs-schema.sql',
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
          const { applied, version } = await store.migrate();
          app.print(
            applied.length === 0
              ? `${target.display}: the @jobs schema is up to date at version ${version} (${target.tables}); nothing applied`
              : `${target.display}: applied ${applied.length === 1 ? 'migration' : 'migrations'} ${versions(applied)} (${target.tables}); the @jobs schema is at version ${version}`,
          );
        },
        'create',
      );
    });
}
