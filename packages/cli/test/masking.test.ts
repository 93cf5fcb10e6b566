/**
 * Passwords never reach the screen: in every URL form, parsable or not, in `--db` and in
 * `JOBS_DATABASE_URL`, in errors, hints and output. `hidePassword` is checked on the forms
 * themselves; the binary then runs with such URLs against PostgreSQL (trust authentication takes
 * any password, so the commands get as far as the migrate hint, the status output and
 * `migrate`'s line) and against ports where nothing listens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hidePassword, hidePasswords } from '../src/hide-password.js';
import { PG_URL, postgresBackend } from './backends.js';
import { jobs } from './cli.js';

/**
 * Passwords with every character a URL treats specially, unencoded and encoded. Each is made of
 * fragments (`Zq9`, `Xw8`, `Yv7`) no message would hold otherwise: none may be printed.
 */
const PASSWORDS = [
  'Zq9/Xw8',
  'Zq9@Xw8',
  'Zq9:Xw8',
  'Zq9#Xw8',
  'Zq9?Xw8',
  'Zq9%Xw8',
  'Zq9%2FXw8%40Yv7',
  'Zq9@Xw8/Yv7:1#2?3',
  'Zq9Xw8Yv7',
];
const FRAGMENTS = /Zq9|Xw8|Yv7/;

describe('hidePassword', () => {
  it('hides the password of every URL form, and nothing else', () => {
    const cases: [string, string][] = [
      ['postgres://app:Zq9Xw8@db:5432/app', 'postgres://app:***@db:5432/app'],
      ['postgresql://app:Zq9/Xw8@db/app?schema=x', 'postgresql://app:***@db/app?schema=x'],
      ['postgres://app:Zq9@Xw8@db/app', 'postgres://app:***@db/app'],
      ['postgres://app:Zq9:Xw8@db/app', 'postgres://app:***@db/app'],
      ['postgres://app:Zq9#Xw8@db/app', 'postgres://app:***@db/app'],
      ['postgres://app:Zq9?Xw8@db/app', 'postgres://app:***@db/app'],
      ['postgres://app:Zq9%40Xw8@db/app', 'postgres://app:***@db/app'],
      ['postgres://:Zq9Xw8@db/app', 'postgres://:***@db/app'],
      ['mysql://root:Zq9/Xw8@db:3306/app', 'mysql://root:***@db:3306/app'],
      ['mariadb://root:Zq9@Xw8@db/app', 'mariadb://root:***@db/app'],
      ['app:Zq9/Xw8@db:5432/app', 'app:***@db:5432/app'],
      ['postgres:app:Zq9Xw8@db/app', 'postgres:app:***@db/app'],
      [
        'postgres://db/app?user=app&password=Zq9Xw8&x=1',
        'postgres://db/app?user=app&password=***&x=1',
      ],
      ['mysql://root@db/app?password=Zq9@Xw8', 'mysql://root@db/app?password=***'],
      ['postgres://db/app?sslpassword=Zq9Xw8', 'postgres://db/app?sslpassword=***'],
      // No password: nothing changes.
      ['postgres://app@db:5432/app', 'postgres://app@db:5432/app'],
      ['mysql://root@127.0.0.1:3306/test', 'mysql://root@127.0.0.1:3306/test'],
      ['./jobs.db', './jobs.db'],
      ['sqlite:/var/lib/app/jobs.db', 'sqlite:/var/lib/app/jobs.db'],
      ['file:///var/lib/app/jobs.db', 'file:///var/lib/app/jobs.db'],
    ];
    for (const [url, hidden] of cases) expect(hidePassword(url), url).toBe(hidden);
  });

  it('hides passwords in a message: in any word, and on their own when the --db value held them', () => {
    expect(hidePasswords("unknown option '--dbb=postgres://app:Zq9Xw8@db/app'", [])).not.toMatch(
      FRAGMENTS,
    );
    expect(
      hidePasswords('driver said: bad password "Zq9/Xw8" for app', [
        'postgres://app:Zq9/Xw8@db/app',
      ]),
    ).toBe('driver said: bad password "***" for app');
    expect(
      hidePasswords('driver said: bad password "Zq9@Xw8"', ['postgres://app:Zq9%40Xw8@db/app']),
    ).toBe('driver said: bad password "***"');
    // A message with an e-mail-like word and no password stays as it was.
    expect(hidePasswords("Access denied for user 'root'@'localhost'", [])).toBe(
      "Access denied for user 'root'@'localhost'",
    );
  });
});

const backend = await postgresBackend();

describe.skipIf(backend === null)('the binary prints no password', () => {
  let schema = '';
  const pgUrl = new URL(PG_URL);
  /** PG_URL with `password` (written as given) and `?schema=` (`null`: none). */
  const withPassword = (password: string, table: string | null = schema): string =>
    `postgres://${pgUrl.username}:${password}@${pgUrl.host}${pgUrl.pathname}${table === null ? '' : `?schema=${table}`}`;

  beforeAll(async () => {
    await backend?.create();
    schema = backend?.args()[backend.args().indexOf('--schema') + 1] as string;
  });
  afterAll(async () => {
    await backend?.drop();
  });

  /** Runs the binary and checks that nothing it printed holds a fragment of a password. */
  async function printsNoPassword(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const result = await jobs(args, env);
    const what = `${args.join(' ')} ${JSON.stringify(env)}`;
    expect(result.stdout, what).not.toMatch(FRAGMENTS);
    expect(result.stderr, what).not.toMatch(FRAGMENTS);
    return result;
  }

  it('in errors, hints and output, for --db and JOBS_DATABASE_URL, parsable or not', async () => {
    // Before migrate: the hint to run it repeats --db (hidden), or the URL is no valid URL.
    for (const password of PASSWORDS) {
      const given = await printsNoPassword(['status', '--db', withPassword(password)]);
      expect(given.code, given.stderr).toBe(1);
    }
    for (const password of ['Zq9/Xw8', 'Zq9@Xw8', 'Zq9@Xw8/Yv7:1#2?3']) {
      const fromEnv = await printsNoPassword(['status'], {
        JOBS_DATABASE_URL: withPassword(password),
      });
      expect(fromEnv.code, fromEnv.stderr).toBe(1);
    }
    // Servers nobody listens on, and a server URL without its scheme (read as a file name).
    for (const password of ['Zq9:Xw8', 'Zq9@Xw8/Yv7:1#2?3']) {
      for (const db of [
        `mysql://root:${password}@127.0.0.1:1/app`,
        `mariadb://root:${password}@127.0.0.1:1/app`,
        `postgres://app:${password}@127.0.0.1:1/app`,
        `app:${password}@127.0.0.1:5432/app`,
      ]) {
        const result = await printsNoPassword(['status', '--db', db]);
        expect(result.code, `${db}: ${result.stderr}`).toBe(1);
      }
    }
    // The form the issue found: a `/` in the password, printed in full in "not a valid URL".
    const slash = await printsNoPassword(['status', '--db', 'postgres://app:Zq9/Xw8@[::1/app']);
    expect(slash.stderr).toMatch(/--db: postgres:\/\/app:\*\*\*@\[::1\/app is not a valid URL/);
  }, 120_000);

  it('in migrate, the hint to run it and status, on a database it reaches', async () => {
    const password = encodeURIComponent('Zq9@Xw8/Yv7');
    const hint = await printsNoPassword(['status', '--db', withPassword(password)]);
    expect(hint.stderr).toMatch(
      /has no @jobs tables \(schema \w+\): run `jobsctl migrate --db 'postgres:\/\/\w+:\*\*\*@[^`]+'` first/,
    );
    const migrated = await printsNoPassword(['migrate', '--db', withPassword(password)]);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toMatch(/^postgres:\/\/\w+:\*\*\*@.*: applied migrations/);
    const status = await printsNoPassword(['status', '--json'], {
      JOBS_DATABASE_URL: withPassword(password),
    });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ database: expect.stringContaining(':***@') });
    const text = await printsNoPassword(['status', '--db', withPassword(password)]);
    expect(text.stdout).toMatch(/^postgres:\/\/\w+:\*\*\*@/);
  });
});
