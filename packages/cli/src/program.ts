/**
 * The `jobsctl` command line: global options, the commands, and exit codes — 0 on success, 1 when
 * the work failed (one line on stderr saying what to check or run), 2 for usage errors.
 */
import { Command, CommanderError } from 'commander';
import packageJson from '../package.json' with { type: 'json' };
import { App, type Io } from './app.js';
import { CLI_NAME } from './cli-name.js';
import { registerCancel } from './commands/cancel.js';
import { registerDashboard } from './commands/dashboard.js';
import { registerHistory } from './commands/history.js';
import { registerList } from './commands/list.js';
import { registerMigrate } from './commands/migrate.js';
import { registerRetryDelete } from './commands/retry-delete.js';
import { registerSchedules } from './commands/schedules.js';
import { registerServe } from './commands/serve.js';
import { registerShow } from './commands/show.js';
import { registerSignal } from './commands/signal.js';
import { registerStatus } from './commands/status.js';
import { registerSuspend } from './commands/suspend.js';
import { registerTail } from './commands/tail.js';
import { CliError } from './errors.js';
import { explain } from './explain.js';
import { databaseValues, hidePasswords } from './hide-password.js';

/** One line: commander's messages may carry a second line (a suggestion). */
const oneLine = (text: string): string => text.trim().split('\n').join(' ');

function createProgram(app: App): Command {
  const program = new Command(CLI_NAME)
    .description('Operate @jobs: look at the queue, retry the dead-letter area, watch workers.')
    .version(packageJson.version, '-V, --version')
    .option(
      '--db <url|file>',
      'postgres://…, mysql://… / mariadb://…, or a SQLite file (default: $JOBS_DATABASE_URL)',
    )
    .option(
      '--schema <name>',
      'PostgreSQL schema of the tables (default: ?schema= in the URL, else jobs)',
    )
    .option('--table-prefix <prefix>', 'MySQL/SQLite table name prefix (default jobs_)')
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (text) => app.io.out(text),
      writeErr: (text) => app.io.err(text),
      outputError: (text, write) => write(`jobsctl: ${oneLine(text)}\n`),
    })
    // Set before the commands are added: each command copies them (output, exits, help).
    .exitOverride()
    .configureHelp({ showGlobalOptions: true })
    .addHelpText(
      'after',
      '\nExamples:\n  jobsctl migrate --db ./jobs.db\n  JOBS_DATABASE_URL=postgres://app@db:5432/app jobsctl status\n  jobsctl list --state deadletter --type send-email\n  jobsctl retry --all --state deadletter --dry-run\n  jobsctl signal approval --key o-1 --payload \'{"ok":true}\'',
    );
  registerMigrate(program, app);
  registerStatus(program, app);
  registerList(program, app);
  registerShow(program, app);
  registerRetryDelete(program, app);
  registerCancel(program, app);
  registerSuspend(program, app);
  registerSignal(program, app);
  registerSchedules(program, app);
  registerHistory(program, app);
  registerTail(program, app);
  registerDashboard(program, app);
  registerServe(program, app);
  return program;
}

/**
 * Runs the command line `argv` (without `node` and the script) and returns the exit code.
 *
 * @example
 * process.exitCode = await main(process.argv.slice(2), processIo);
 */
export async function main(argv: readonly string[], given: Io): Promise<number> {
  // Whatever reaches stderr (errors, hints, a driver's message) has the passwords hidden.
  const sources = databaseValues(argv, given.env);
  const io: Io = { ...given, err: (text) => given.err(hidePasswords(text, sources)) };
  const app = new App(io);
  const program = createProgram(app);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end in a CommanderError with exit code 0; the rest are usage errors.
      return error.exitCode === 0 ? 0 : 2;
    }
    const code = error instanceof CliError ? error.exitCode : 1;
    io.err(`jobsctl: error: ${oneLine(explain(error, app.target))}\n`);
    return code;
  }
}
