/**
 * What the command says when something goes wrong: one line on stderr, no stack, exit code 1
 * (2 for usage errors). Driver errors are recognised by their codes and turned into what the
 * operator should check or run.
 */
import { isMissingTableError } from '@jobs/core/sql';
import { CliError, StoppedError } from './errors.js';
import type { Target } from './target.js';

/** Driver error codes (`code`, `errno`) that mean the server could not be reached. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'PROTOCOL_CONNECTION_LOST',
]);

const WHY_UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
  PROTOCOL_CONNECTION_LOST: 'connection lost',
};

interface DriverError {
  code?: unknown;
  errno?: unknown;
  message?: unknown;
}

/** The error and its causes (`cause`, `AggregateError.errors`), outermost first. */
function chain(error: unknown): DriverError[] {
  const out: DriverError[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && out.length < 20) {
    const next = queue.shift();
    if (next === null || typeof next !== 'object') continue;
    out.push(next as DriverError);
    const { cause, errors } = next as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
  return out;
}

function has(errors: DriverError[], test: (e: DriverError) => boolean): DriverError | undefined {
  return errors.find(test);
}

const codeOf = (e: DriverError): string => (typeof e.code === 'string' ? e.code : '');
const messageOf = (e: DriverError): string => (typeof e.message === 'string' ? e.message : '');

/** `jobsctl migrate` with the options that select the same tables. */
export function migrateHint(target: Target): string {
  return `jobsctl migrate ${target.selector}`.trimEnd();
}

/**
 * The one line to print for `error`: what went wrong and, where it can tell, what to check or
 * run. `target` is the database the command was connecting to, when it got that far.
 */
export function explain(error: unknown, target: Target | null): string {
  if (error instanceof CliError) return error.message;
  if (error instanceof StoppedError) return `${error.message}: ${explain(error.cause, target)}`;
  const errors = chain(error);
  const server = target?.kind === 'postgres' ? 'PostgreSQL' : 'MySQL/MariaDB';
  /** `PostgreSQL at host:port`, or the SQLite file. */
  const where = !target
    ? 'the database'
    : target.kind === 'sqlite'
      ? target.where
      : `${server} at ${target.where}`;

  const unreachable = has(
    errors,
    (e) =>
      UNREACHABLE.has(codeOf(e)) ||
      /timeout expired|connection timeout|Connection terminated unexpectedly/i.test(messageOf(e)),
  );
  if (unreachable && target && target.kind !== 'sqlite') {
    const why = WHY_UNREACHABLE[codeOf(unreachable)] ?? 'no connection';
    return `cannot reach ${where} (${why}): check that the server is running and that host and port in --db are right`;
  }

  // PostgreSQL: 28P01 bad password, 28000 no such role / not allowed; MySQL: 1045.
  const login = has(errors, (e) =>
    ['28P01', '28000', 'ER_ACCESS_DENIED_ERROR'].includes(codeOf(e)),
  );
  if (login) {
    return `${where} refused the login (${firstLine(messageOf(login))}): check user and password in --db`;
  }
  // PostgreSQL 3D000, MySQL 1049: the database in the URL does not exist.
  const noDatabase = has(errors, (e) => ['3D000', 'ER_BAD_DB_ERROR'].includes(codeOf(e)));
  if (noDatabase) {
    return `${firstLine(messageOf(noDatabase))} on ${where}: check the database name in --db`;
  }

  // Missing tables (PostgreSQL 42P01/3F000, MySQL 1146, SQLite "no such table"): never migrated.
  const noTables = has(errors, isMissingTableError);
  if (noTables && target) {
    return `${where} has no @jobs tables (${target.tables}): run \`${migrateHint(target)}\` first`;
  }
  // Missing columns: the schema is older than this command.
  const oldSchema = has(
    errors,
    (e) =>
      ['42703', 'ER_BAD_FIELD_ERROR'].includes(codeOf(e)) || /no such column/i.test(messageOf(e)),
  );
  if (oldSchema && target) {
    return `the @jobs schema on ${where} is older than this command (${firstLine(messageOf(oldSchema))}): run \`${migrateHint(target)}\``;
  }

  const message = error instanceof Error ? error.message : String(error);
  return firstLine(message) || 'failed for an unknown reason';
}

/** The first line of a message, which is the one that says what happened. */
export function firstLine(text: string): string {
  return text.split('\n')[0]?.trim() ?? '';
}
