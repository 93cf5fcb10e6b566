/**
 * Which database `--db` (or `JOBS_DATABASE_URL`) names: `postgres://` / `postgresql://` is
 * PostgreSQL, `mysql://` / `mariadb://` is MySQL or MariaDB, anything else (a path, `file:…`,
 * `sqlite:…`) is a SQLite file. Parsing connects to nothing.
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError } from './errors.js';
import { shellWord } from './format.js';
import { hidePassword } from './hide-password.js';

/** Where the tables are, as given on the command line. */
export interface TargetOptions {
  /** PostgreSQL schema (`--schema`); default the URL's `?schema=`, else the store's (`jobs`). */
  schema?: string | undefined;
  /** MySQL/SQLite table prefix (`--table-prefix`); default the store's (`jobs_`). */
  tablePrefix?: string | undefined;
}

interface TargetBase {
  /** The URL with its password hidden, or the file path: safe to print. */
  display: string;
  /** `host:port`, or the file path. */
  where: string;
  /** The store's tables, for messages: `schema jobs`, `tables jobs_* in database app`. */
  tables: string;
  /** Options that select the same tables again (for hints such as `jobsctl migrate …`). */
  selector: string;
}

export type Target =
  | (TargetBase & { kind: 'postgres'; url: string; schema: string | undefined })
  | (TargetBase & { kind: 'mysql'; url: string; tablePrefix: string | undefined })
  | (TargetBase & { kind: 'sqlite'; filename: string; tablePrefix: string | undefined });

const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;

function parseUrl(text: string, example: string): URL {
  const hidden = hidePassword(text);
  // A password's `/`, `#` or `?` ends the host part of a URL unless it is percent-encoded.
  const hint =
    hidden === text ? '' : '; percent-encode / @ : # ? % in the password (%2F %40 %3A %23 %3F %25)';
  const invalid = () =>
    new CliError(`--db: ${hidden} is not a valid URL (expected e.g. ${example}${hint})`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalid();
  }
  // `postgres://app:a@b/c@db/app` parses with host `b`, a piece of the password that messages
  // would then print: the host must be what follows the password.
  const afterPassword = text.slice(text.lastIndexOf('@') + 1).toLowerCase();
  if (hidden !== text && !afterPassword.startsWith(url.host.toLowerCase())) throw invalid();
  return url;
}

/**
 * The database `db` names, with the table options applied.
 * @param fromEnv the URL came from `JOBS_DATABASE_URL`: hints leave `--db` out.
 */
export function parseTarget(db: string, options: TargetOptions = {}, fromEnv = false): Target {
  const text = db.trim();
  if (text === '') {
    throw new CliError('--db is empty: give a postgres:// or mysql:// URL or a SQLite file');
  }
  const display = hidePassword(text);
  const extra = (flags: [string, string | undefined][]): string =>
    flags
      .filter((flag): flag is [string, string] => flag[1] !== undefined)
      .map(([name, value]) => ` ${name} ${shellWord(value)}`)
      .join('');
  const dbFlag = fromEnv ? '' : `--db ${shellWord(display)}`;
  const scheme = SCHEME.exec(text)?.[1]?.toLowerCase();

  if (scheme === 'postgres' || scheme === 'postgresql') {
    const url = parseUrl(text, 'postgres://user@localhost:5432/app');
    if (!url.hostname) throw new CliError(`--db: ${display} names no host`);
    // `?schema=` is ours, not libpq's: take it out before pg sees the URL.
    const fromUrl = url.searchParams.get('schema') ?? undefined;
    url.searchParams.delete('schema');
    const schema = options.schema ?? fromUrl;
    return {
      kind: 'postgres',
      url: url.toString(),
      schema,
      display,
      where: `${url.hostname}:${url.port || '5432'}`,
      tables: `schema ${schema ?? 'jobs'}`,
      selector: `${dbFlag}${extra([['--schema', options.schema]])}`,
    };
  }
  if (scheme === 'mysql' || scheme === 'mariadb') {
    const url = parseUrl(text.replace(/^mariadb:/i, 'mysql:'), 'mysql://root@localhost:3306/app');
    if (!url.hostname) throw new CliError(`--db: ${display} names no host`);
    const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
    if (database === '') {
      throw new CliError(
        `--db: ${display} names no database (expected mysql://user@host:3306/<database>)`,
      );
    }
    return {
      kind: 'mysql',
      url: url.toString(),
      tablePrefix: options.tablePrefix,
      display,
      where: `${url.hostname}:${url.port || '3306'}`,
      tables: `tables ${options.tablePrefix ?? 'jobs_'}* in database ${database}`,
      selector: `${dbFlag}${extra([['--table-prefix', options.tablePrefix]])}`,
    };
  }
  if (scheme !== undefined && scheme !== 'file' && scheme !== 'sqlite') {
    throw new CliError(
      `--db: unsupported database ${scheme}:// (use postgres://, postgresql://, mysql://, mariadb://, or a SQLite file path)`,
    );
  }
  let filename: string;
  if (scheme === 'file') {
    try {
      filename = fileURLToPath(text);
    } catch {
      throw new CliError(`--db: ${display} is not a valid file URL`);
    }
  } else {
    filename = text.replace(/^sqlite:(\/\/)?/i, '').replace(/^file:/i, '');
  }
  if (filename === '') throw new CliError(`--db: ${display} names no file`);
  // A server URL without its scheme (`app:secret@db/app`) reads as a file name: hide its password.
  const shown = hidePassword(filename);
  return {
    kind: 'sqlite',
    filename: resolve(filename),
    tablePrefix: options.tablePrefix,
    display: shown,
    where: shown,
    tables: `tables ${options.tablePrefix ?? 'jobs_'}*`,
    selector: `${fromEnv ? '' : `--db ${shellWord(shown)}`}${extra([['--table-prefix', options.tablePrefix]])}`,
  };
}
