/**
 * A private PgBouncer for the pooler tests (and `pnpm bench processes`): its own port and config
 * in a temp dir, in front of a PostgreSQL, with one database alias per pool mode (`test_tx`:
 * transaction, `test_session`: session). The system's PgBouncer (if any) is never touched.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** The pgbouncer binary: on PATH, or where Debian's package puts it; null when absent. */
export function findPgbouncer(): string | null {
  for (const candidate of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
    if (existsSync(candidate)) return candidate;
  }
  try {
    return execFileSync('which', ['pgbouncer'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/**
 * The binary, or null (a skip, said once, loudly) when it is absent outside CI; under CI=true
 * an absent binary fails the run (`.ci/run` installs it).
 */
export function pgbouncerOrSkip(): string | null {
  const binary = findPgbouncer();
  if (binary) return binary;
  if (process.env.CI === 'true') {
    throw new Error(
      'pgbouncer is not installed and CI=true (.ci/run installs it: apt-get install -y pgbouncer)',
    );
  }
  console.warn(
    '\n!!! @jobs/postgres PgBouncer tests SKIPPED: no pgbouncer binary (apt-get install -y pgbouncer)\n',
  );
  return null;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface Bouncer {
  /** URL of the transaction-mode alias. */
  transactionUrl: string;
  /** URL of the session-mode alias. */
  sessionUrl: string;
  stop(): Promise<void>;
}

/**
 * Starts a PgBouncer on a free port in front of `targetUrl` (`poolSize` server connections per
 * alias); resolves once it accepts a query.
 */
export async function startPgbouncer(
  binary: string,
  targetUrl: string,
  poolSize = 8,
): Promise<Bouncer> {
  const target = new URL(targetUrl);
  const dir = mkdtempSync(join(tmpdir(), 'jobs-pgbouncer-'));
  // PgBouncer refuses to run as root: it drops to `postgres` (or nobody), which writes here.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const user = decodeURIComponent(target.username || 'postgres');
  const db = (mode: string) =>
    `host=${target.hostname} port=${target.port || 5432} dbname=${target.pathname.slice(1)} user=${user} pool_mode=${mode}`;
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `test_tx = ${db('transaction')}`,
      `test_session = ${db('session')}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      'max_client_conn = 200',
      `default_pool_size = ${poolSize}`,
      '',
    ].join('\n'),
  );
  const args = [join(dir, 'pgbouncer.ini')];
  if (process.getuid?.() === 0) args.unshift('-u', hasUser('postgres') ? 'postgres' : 'nobody');
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = (alias: string) => `postgres://${user}@127.0.0.1:${port}/${alias}`;
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  for (let attempt = 0; ; attempt++) {
    const client = new pg.Client({
      connectionString: url('test_tx'),
      connectionTimeoutMillis: 1_000,
    });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      break;
    } catch (error) {
      await client.end().catch(() => {});
      if (attempt >= 50 || child.exitCode !== null) {
        const log = existsSync(join(dir, 'pgbouncer.log'))
          ? readFileSync(join(dir, 'pgbouncer.log'), 'utf8')
          : '';
        await stop();
        throw new Error(`pgbouncer did not start: ${output}\n${log}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { transactionUrl: url('test_tx'), sessionUrl: url('test_session'), stop };
}

function hasUser(name: string): boolean {
  try {
    execFileSync('id', [name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
