/**
 * Examples are templates: each one must work when its folder is copied out of the repository and
 * its `workspace:*` dependencies are swapped for published versions. This test does exactly that
 * for every numbered example: copies it under the OS temp dir, points `@jobs/*` at tarballs
 * packed from the workspace, installs it with pnpm (no workspace around it, nothing hoisted from
 * it, no workspace tools on PATH), then runs its `typecheck` script (sources, tests and vitest
 * config) and its `start` script. A missing dependency, a config that reaches into `../../` or a
 * script that only works inside the monorepo fails here.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createMysqlDatabase,
  createPostgresDatabase,
  onPostgres,
  PG_URL,
  type ServerDatabase,
  serverAvailable,
  uniqueName,
} from './databases.js';
import {
  CURRENT_TYPESCRIPT,
  copyOutOfRepo,
  EXAMPLES,
  installCurrentTypeScript,
  numberedExamples,
  outsideEnv,
  pnpm,
  typecheckWith,
} from './workspace.js';

interface Template {
  /** Servers it cannot run without. */
  needs?: ('postgres' | 'mysql')[];
  /** Runs `pnpm start` in the copy (as often as it takes) and checks what it printed. */
  start(dir: string): Promise<void>;
}

const start = async (dir: string, env: Record<string, string | undefined> = {}) =>
  (await pnpm(dir, ['start'], outsideEnv({ DATABASE_URL: undefined, ...env }))).stdout;

const available = {
  postgres: await serverAvailable('postgres'),
  mysql: await serverAvailable('mysql'),
};

const templates: Record<string, Template> = {
  '01-quickstart': {
    async start(dir) {
      const stdout = await start(dir);
      expect(stdout).toMatch(/charge card\s+.*deadletter → retried → async → running → done/);
      expect(stdout).toMatch(/import v1 file\s+async → running → deadletter/);
    },
  },
  '02-postgres-cluster': {
    needs: ['postgres'],
    async start(dir) {
      const schema = uniqueName('example_cluster');
      try {
        const stdout = await start(dir, { DATABASE_URL: PG_URL, JOBS_SCHEMA: schema });
        expect(stdout).toContain('killed w1 with SIGKILL');
        expect(stdout).toContain('40 of 40 distinct jobs done');
      } finally {
        await onPostgres(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
    },
  },
  '03-custom-store': {
    async start(dir) {
      const stdout = await start(dir);
      expect(stdout).toContain('hello, Ada');
      expect(stdout).toContain('flaky          succeeded on attempt 2');
    },
  },
  '04-typeorm-app': {
    async start(dir) {
      const onServer = async (create: () => Promise<ServerDatabase>, type: RegExp) => {
        const db = await create();
        try {
          const stdout = await start(dir, { DATABASE_URL: db.url });
          expect(stdout).toMatch(type);
          expect(stdout).toContain('emails sent: 1; jobs left: 0');
        } finally {
          await db.drop();
        }
      };
      await Promise.all([
        start(dir).then((stdout) => {
          expect(stdout).toContain('Shop on better-sqlite3.');
          expect(stdout).toContain('emails sent: 1; jobs left: 0');
        }),
        available.postgres && onServer(createPostgresDatabase, /Shop on postgres\./),
        available.mysql && onServer(createMysqlDatabase, /Shop on (mysql|mariadb)\./),
      ]);
    },
  },
  '05-sharded-report': {
    async start(dir) {
      const stdout = await start(dir, { DEMO_SECONDS: '4', DEMO_EVERY: 'PT2S' });
      expect(stdout).toContain('OK: every shard of every occurrence ran exactly once');
    },
  },
  '06-operations': {
    async start(dir) {
      // A file of its own: a jobs.db left in the example folder by a local run is copied too.
      const stdout = await start(dir, { JOBS_DB: 'templates-test.db' });
      expect(stdout).toContain("name: 'jobs.run send-email'");
      expect(stdout).toMatch(/sync-crm\s+deadletter after 2 attempts: CRM 503/);
      expect(stdout).toContain('2 completed (in history), 1 in the dead-letter area.');
      // The operator's side, as the README runs it: the CLI the example installs, on its file.
      const jobs = async (...args: string[]) =>
        (await pnpm(dir, ['exec', 'jobsctl', ...args, '--db', 'templates-test.db'], outsideEnv()))
          .stdout;
      expect(await jobs('history', '--outcome', 'completed')).toMatch(/send-email\s+completed/);
      expect(await jobs('retry', '--all', '--state', 'deadletter', '--dry-run')).toContain(
        'would retry 1 job',
      );
    },
  },
  '07-flow-control': {
    async start(dir) {
      const stdout = await start(dir, { JOBS_DB: 'templates-test.db' });
      expect(stdout).toMatch(/operator: job 1 is at page \d+ of 40/);
      expect(stdout).toContain('cancel → requested');
      expect(stdout).toMatch(/finished with outcome cancelled, stopped at page \d+ of 40/);
      expect(stdout).toContain('cancel again → finished');
      expect(stdout).toContain("the handler's signal aborted with a CancelledError");
      const jobs = async (...args: string[]) =>
        (await pnpm(dir, ['exec', 'jobsctl', ...args, '--db', 'templates-test.db'], outsideEnv()))
          .stdout;
      expect(await jobs('history', '--outcome', 'cancelled')).toMatch(/render-report\s+cancelled/);
    },
  },
  '08-external-worker': {
    async start(dir) {
      const stdout = await start(dir, { JOBS_DB: 'templates-test.db' });
      expect(stdout).toContain('python worker exited with 0');
      expect(stdout).toMatch(/docs\s+completed after 1 attempt\(s\): \{"name":"docs"/);
      expect(stdout).toMatch(/flaky\s+completed after 2 attempt\(s\)/);
      expect(stdout).toMatch(
        /broken\s+deadletter after 1 attempt\(s\): script exited with code 65/,
      );
    },
  },
  '09-workflow': {
    async start(dir) {
      const stdout = await start(dir, { JOBS_DB: 'templates-test.db' });
      expect(stdout).toContain('charge    2400 cents charged');
      expect(stdout).toMatch(/http: POST \/orders\/A-1001\/approve .*engine\.signal\('approval'/);
      expect(stdout).toContain('approval request was answered 202');
      expect(stdout).toContain('labels    LBL-A-1001-1, LBL-A-1001-2');
      expect(stdout).toMatch(/completed after \d+ runs of its handler \(attempt 1\)/);
      expect(stdout).toContain('ran: charge 1, print-label 2, confirm 1; order_charges rows: 1');
      expect(stdout).toMatch(/checkpoint pickup-window\s+\{"\$sleepUntil":\d+\}/);
    },
  },
};

const examples = numberedExamples();
/** Packed once for all test files by `global-setup.ts`. */
const tarballs = new Map(Object.entries(inject('tarballs')));

let root = '';

/** The current TypeScript major, installed once: every example must compile with it too. */
let currentTsc: Promise<string>;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'jobs-templates-'));
  currentTsc = installCurrentTypeScript(root);
  currentTsc.catch(() => {}); // awaited (and reported) by each example's test
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

/** Copies an example out of the repository and swaps `workspace:*` for the packed tarballs. */
function copyOut(example: string): string {
  const dir = join(root, example);
  copyOutOfRepo(join(EXAMPLES, example), dir, tarballs);
  return dir;
}

describe('examples are templates', () => {
  it('every numbered example is checked here', () => {
    expect(examples.sort()).toEqual(Object.keys(templates).sort());
  });

  describe.concurrent('copied out of the repository', () => {
    for (const example of examples) {
      const template = templates[example];
      if (!template) continue; // the test above names it
      const missing = (template.needs ?? []).filter((server) => !available[server]);
      it.skipIf(missing.length > 0)(
        `${example} installs, typechecks (TypeScript 5 and ${CURRENT_TYPESCRIPT}) and runs`,
        async () => {
          const dir = copyOut(example);
          // --no-frozen-lockfile: under CI=true pnpm would otherwise insist on a lockfile.
          await pnpm(dir, ['install', '--prefer-offline', '--no-frozen-lockfile']);
          // tsconfig.json includes vitest.config.ts: a config that reaches into ../../ fails here.
          await pnpm(dir, ['run', 'typecheck']);
          await typecheckWith(await currentTsc, dir, 'tsconfig.json');
          await template.start(dir);
        },
        // An install and two typechecks beside eight other examples doing the same: 2–3
        // minutes on a loaded two-core machine, more than the file's 180 s default.
        300_000,
      );
    }
  });
});
