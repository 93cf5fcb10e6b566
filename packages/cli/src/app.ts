/**
 * What every command shares: where output goes, the database the global options name, opening
 * and closing it around the command, and the job filter options.
 */
import type { JobFilter, JobState } from '@jobs/core';
import { JOB_STATES } from '@jobs/core';
import { type Command, InvalidArgumentError } from 'commander';
import { openSession, type Session } from './connect.js';
import { UsageError } from './errors.js';
import { parseTarget, type Target } from './target.js';

/** Where a command writes; the binary's is the process's, tests may pass their own. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
  /** stderr is a terminal: progress bars are drawn there. */
  readonly interactive: boolean;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The options every command takes (declared on the program). */
export interface GlobalOptions {
  db?: string;
  schema?: string;
  tablePrefix?: string;
}

export class App {
  /** The database of the running command, once known (error messages name it). */
  target: Target | null = null;

  constructor(readonly io: Io) {}

  /** The database `--db` or `JOBS_DATABASE_URL` names. */
  resolveTarget(command: Command): Target {
    const globals = command.optsWithGlobals<GlobalOptions>();
    const fromEnv = globals.db === undefined;
    const db = globals.db ?? this.io.env.JOBS_DATABASE_URL;
    if (db === undefined) {
      throw new UsageError(
        'no database given: pass --db <url|file> or set JOBS_DATABASE_URL (see jobsctl --help)',
      );
    }
    this.target = parseTarget(
      db,
      { schema: globals.schema, tablePrefix: globals.tablePrefix },
      fromEnv,
    );
    return this.target;
  }

  /** Runs `work` with the store and a client engine, and closes them after (also on errors). */
  async withSession<T>(
    command: Command,
    work: (session: Session) => Promise<T>,
    mode: 'existing' | 'create' = 'existing',
  ): Promise<T> {
    const session = await openSession(this.resolveTarget(command), mode);
    try {
      return await work(session);
    } finally {
      await session.close().catch(() => {});
    }
  }

  /** Prints lines of text. */
  print(text: string): void {
    this.io.out(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Prints a value as indented JSON (times as ISO-8601 strings). */
  printJson(value: unknown): void {
    this.io.out(`${JSON.stringify(value, null, 2)}\n`);
  }
}

/** Options of commands that select jobs, as commander gives them. */
export interface FilterOptions {
  state?: JobState[];
  type?: string;
  queue?: string;
  scope?: string;
  tenant?: string;
  schedule?: string;
}

/** `--state deadletter` or `--state timer,async`, checked against the job states. */
export function parseStates(value: string): JobState[] {
  const states = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const state of states) {
    if (!(JOB_STATES as readonly string[]).includes(state)) {
      throw new InvalidArgumentError(`unknown state ${state} (states: ${JOB_STATES.join(', ')})`);
    }
  }
  if (states.length === 0) throw new InvalidArgumentError('give at least one state');
  return states as JobState[];
}

/** A parser for an integer option within `min..max`. */
export function integer(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return n;
  };
}

/** Adds the job filter options to a command. */
export function withFilterOptions(command: Command, states = true): Command {
  if (states) {
    command.option(
      '--state <states>',
      `only jobs in these states, comma-separated (${JOB_STATES.join(', ')})`,
      parseStates,
    );
  }
  return command
    .option('--type <type>', 'only jobs of this type')
    .option('--queue <queue>', 'only jobs in this queue')
    .option('--scope <scope>', 'only jobs with this scope')
    .option('--tenant <tenant>', 'only jobs of this tenant')
    .option('--schedule <name>', 'only jobs created by this schedule');
}

/** The `JobFilter` the filter options describe. */
export function toFilter(options: FilterOptions): JobFilter {
  const filter: JobFilter = {};
  if (options.state !== undefined) {
    filter.state = options.state.length === 1 ? (options.state[0] as JobState) : options.state;
  }
  if (options.type !== undefined) filter.type = options.type;
  if (options.queue !== undefined) filter.queue = options.queue;
  if (options.scope !== undefined) filter.scope = options.scope;
  if (options.tenant !== undefined) filter.tenantId = options.tenant;
  if (options.schedule !== undefined) filter.schedule = options.schedule;
  return filter;
}

/** `--type email --state deadletter`: the filter as it was given, for messages. */
export function describeFilter(filter: JobFilter): string {
  const parts = Object.entries(filter).map(
    ([key, value]) => `${key}=${Array.isArray(value) ? value.join(',') : String(value)}`,
  );
  return parts.length === 0 ? 'all jobs' : parts.join(' ');
}
