/**
 * The binary's command line itself: help, exit codes, usage errors and bad URLs (one line each),
 * `JOBS_DATABASE_URL`. Only SQLite files are touched.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jobs, ok } from './cli.js';

const dir = mkdtempSync(join(tmpdir(), 'jobs-cli-usage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Stderr of a failed command: exactly one line, no stack. */
function oneLine(stderr: string): string {
  const lines = stderr.trimEnd().split('\n');
  expect(lines, stderr).toHaveLength(1);
  return lines[0] as string;
}

describe('the jobsctl command line', () => {
  it('--help lists every command and exits 0; each command has its own help', async () => {
    const help = await ok(['--help']);
    for (const command of [
      'migrate',
      'status',
      'list',
      'show',
      'retry',
      'delete',
      'suspend',
      'activate',
      'schedules',
      'history',
      'tail',
      'signal',
    ]) {
      expect(help).toMatch(new RegExp(`^  ${command} `, 'm'));
    }
    expect(help).toContain('--db <url|file>');
    expect(await ok(['retry', '--help'])).toMatch(/--dry-run/);
    expect(await ok(['signal', '--help'])).toMatch(/--payload <json>/);
    expect(await ok(['schedules', 'pause', '--help'])).toMatch(/Usage: jobsctl schedules pause/);
    expect(await ok(['--version'])).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it('usage errors exit with code 2 and one line', async () => {
    const cases: [string[], RegExp][] = [
      [['stauts'], /^jobsctl: error: unknown command 'stauts' \(Did you mean status\?\)$/],
      [['status', '--jsno'], /^jobsctl: error: unknown option '--jsno' \(Did you mean --json\?\)$/],
      [['status'], /no database given: pass --db <url\|file> or set JOBS_DATABASE_URL/],
      [['list', '--db', 'x.db', '--limit', 'many'], /'--limit <n>' argument 'many' is invalid/],
      [['list', '--db', 'x.db', '--state', 'dead'], /unknown state dead \(states: timer, async/],
      [['show', '--db', 'x.db'], /missing required argument 'id'/],
      [['signal', 'approval', '--db', 'x.db'], /required option '--key <key>' not specified/],
      [
        ['signal', 'approval', '--key', 'o-1', '--payload', '{ok: true}', '--db', 'x.db'],
        /option '--payload <json>' argument '\{ok: true\}' is invalid\. not JSON \(/,
      ],
    ];
    for (const [args, message] of cases) {
      const result = await jobs(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(oneLine(result.stderr)).toMatch(message);
      expect(result.stdout).toBe('');
    }
    // No command at all: the help, on stderr.
    const bare = await jobs([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/^Usage: jobsctl/);
  });

  it('a bad or unsupported URL exits with code 1 and one line, the password hidden', async () => {
    const cases: [string, RegExp][] = [
      [
        'postgres://app:s3cret@[::1/app',
        /^jobsctl: error: --db: postgres:\/\/app:\*\*\*@\[::1\/app is not a valid URL \(expected e\.g\. postgres:\/\/user@localhost:5432\/app; percent-encode \/ @ : # \? % in the password \(%2F %40 %3A %23 %3F %25\)\)$/,
      ],
      ['mysql://root@localhost:3306', /--db: mysql:\/\/root@localhost:3306 names no database/],
      ['redis://localhost:6379', /unsupported database redis:\/\/ \(use postgres:\/\//],
    ];
    for (const [db, message] of cases) {
      const result = await jobs(['status', '--db', db]);
      expect(result.code, db).toBe(1);
      const line = oneLine(result.stderr);
      expect(line).toMatch(message);
      expect(line).not.toContain('s3cret');
    }
  });

  it('JOBS_DATABASE_URL names the database when --db is not given; --db wins over it', async () => {
    const file = join(dir, 'env.db');
    const env = { JOBS_DATABASE_URL: `sqlite:${file}` };
    expect(await ok(['migrate'], env)).toMatch(/: applied migrations 1–\d+ /);
    expect(await ok(['migrate'], env)).toMatch(/: the @jobs schema is up to date at version/);
    expect(await ok(['status', '--json'], env)).toMatch(/"total": 0/);
    const other = join(dir, 'other.db');
    const result = await jobs(['status', '--db', other], env);
    expect(result.code).toBe(1);
    // The hint repeats the --db that was given; from the environment it needs none.
    expect(oneLine(result.stderr)).toContain(`run \`jobsctl migrate --db ${other}\``);
    const fromEnv = await jobs(['status'], { JOBS_DATABASE_URL: other });
    expect(oneLine(fromEnv.stderr)).toContain('run `jobsctl migrate` to create it');
  });

  it('migrate --print-sql on a SQLite path prints the schema and creates no file', async () => {
    const file = join(dir, 'never.db');
    const sql = await ok(['migrate', '--print-sql', '--db', file, '--table-prefix', 'app_']);
    expect(sql).toMatch(/CREATE TABLE "?app_jobs"? \(/);
    expect(existsSync(file)).toBe(false);
  });
});
