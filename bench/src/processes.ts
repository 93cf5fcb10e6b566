/**
 * Throughput as worker processes are added on one database (issue 27, "Measure"): 1, 2 and 4
 * worker processes — each an engine in its default configuration at concurrency 10
 * (`peers/drain-worker.ts`) — drain no-op jobs enqueued up front, on
 *
 * - PostgreSQL, straight;
 * - PostgreSQL through a private transaction-mode PgBouncer (`pooler: 'transaction'`, LISTEN
 *   straight to the server; `PGBOUNCER_POOL` server connections, default 20);
 * - MySQL/MariaDB.
 *
 * Each run gets a fresh schema (table prefix) and is dropped after. Printed: jobs/s, statements
 * per job (every statement the workers sent), and the ratios N processes ÷ 1 and PgBouncer ÷
 * straight at equal N; `--rounds` (default 1) takes the median.
 *
 * `pnpm bench processes [--quick] [--procs 1,2,4] [--rounds N] [postgres] [pgbouncer] [mysql]`
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { JobEngine, type JobStore, silentLogger } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import mysql from 'mysql2/promise';
import { findPgbouncer, startPgbouncer } from '../../packages/postgres/test/pgbouncer.js';
import { PG_URL } from './drain-targets.js';
import {
  type DrainResult,
  drainWithWorkers,
  dropPostgresSchemas,
  enqueueInBatches,
  printTable,
} from './harness.js';
import type { DrainWorkerArgs } from './peers/drain-worker.js';

const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const WORKER = fileURLToPath(new URL('./peers/drain-worker.ts', import.meta.url));
const CONCURRENCY = 10;
const TARGETS = ['postgres', 'pgbouncer', 'mysql'] as const;
type Target = (typeof TARGETS)[number];
const NAMES: Record<Target, string> = {
  postgres: 'PostgreSQL',
  pgbouncer: 'PostgreSQL via PgBouncer (transaction)',
  mysql: 'MySQL/MariaDB',
};

interface Setup {
  store: JobStore;
  args: DrainWorkerArgs;
  drop(): Promise<void>;
}

/** A fresh namespace on `target` with `total` no-op jobs in it, and the workers' arguments. */
async function prepare(target: Target, total: number, bouncerUrl: string | null): Promise<Setup> {
  const suffix = randomBytes(4).toString('hex');
  let store: JobStore;
  let args: DrainWorkerArgs;
  let drop: () => Promise<void>;
  if (target === 'mysql') {
    const prefix = `bench_procs_${suffix}_`;
    store = new MysqlJobStore({ uri: MYSQL_URL, tablePrefix: prefix });
    args = { store: 'mysql', url: MYSQL_URL, namespace: prefix, concurrency: CONCURRENCY };
    drop = () => dropMysqlTables(prefix);
  } else {
    const schema = `bench_procs_${suffix}`;
    store = new PostgresJobStore({ connectionString: PG_URL, schema });
    args = {
      store: 'postgres',
      url: target === 'pgbouncer' ? (bouncerUrl as string) : PG_URL,
      namespace: schema,
      concurrency: CONCURRENCY,
      ...(target === 'pgbouncer' ? { listenUrl: PG_URL } : {}),
    };
    drop = () => dropPostgresSchemas(PG_URL, [schema]);
  }
  await store.migrate();
  const engine = new JobEngine({ store, logger: silentLogger, handlers: { noop: async () => {} } });
  await enqueueInBatches(total, (payloads) =>
    engine.enqueueMany(payloads.map((payload) => ({ type: 'noop' as const, payload }))),
  );
  return { store, args, drop };
}

async function dropMysqlTables(prefix: string): Promise<void> {
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    const [rows] = await connection.query(
      'SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?',
      [`${prefix.replace(/_/g, '\\_')}%`],
    );
    for (const { t } of rows as { t: string }[]) await connection.query(`DROP TABLE \`${t}\``);
  } finally {
    await connection.end();
  }
}

/** One drain of `total` jobs by `processes` workers on `target`. */
async function drain(
  target: Target,
  processes: number,
  total: number,
  bouncerUrl: string | null,
): Promise<DrainResult> {
  const setup = await prepare(target, total, bouncerUrl);
  try {
    return await drainWithWorkers({
      module: WORKER,
      processes,
      args: () => setup.args,
      total,
      remaining: () => setup.store.bulk?.countJobs({}) ?? Promise.resolve(0),
      what: `${NAMES[target]}: ${processes} process(es) ran ${total} jobs`,
    });
  } finally {
    await setup.store.close();
    await setup.drop();
  }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

export async function runProcessesBench(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const option = (name: string): string | undefined => {
    const at = argv.indexOf(name);
    return at >= 0 ? argv[at + 1] : undefined;
  };
  const procs = (option('--procs') ?? '1,2,4').split(',').map(Number);
  const rounds = Number(option('--rounds') ?? 1);
  const asked = TARGETS.filter((t) => argv.includes(t));
  const targets = asked.length > 0 ? asked : [...TARGETS];
  const total = quick ? 5_000 : 20_000;
  const poolSize = Number(process.env.PGBOUNCER_POOL ?? 20);

  let bouncer: Awaited<ReturnType<typeof startPgbouncer>> | null = null;
  if (targets.includes('pgbouncer')) {
    const binary = findPgbouncer();
    if (!binary) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
    bouncer = await startPgbouncer(binary, PG_URL, poolSize);
  }
  console.log(
    `processes: ${total} no-op jobs enqueued up front, drained by N worker processes (engine defaults, concurrency ${CONCURRENCY} each); ${rounds} round(s), medians${bouncer ? `; PgBouncer transaction mode, ${poolSize} server connections` : ''}`,
  );
  const rates = new Map<string, number>();
  const rows: (string | number)[][] = [];
  try {
    for (const target of targets) {
      for (const n of procs) {
        const results: DrainResult[] = [];
        for (let round = 0; round < rounds; round++) {
          results.push(await drain(target, n, total, bouncer?.transactionUrl ?? null));
        }
        const rate = median(results.map((r) => r.rate));
        rates.set(`${target}:${n}`, rate);
        const one = rates.get(`${target}:1`);
        const direct = target === 'pgbouncer' ? rates.get(`postgres:${n}`) : undefined;
        rows.push([
          NAMES[target],
          String(n),
          Math.round(rate),
          median(results.map((r) => r.commandsPerJob)).toFixed(3),
          one ? `${(rate / one).toFixed(2)}×` : '—',
          direct ? `${(rate / direct).toFixed(2)}×` : '—',
        ]);
        console.log(`  ${NAMES[target]}, ${n} process(es): ${Math.round(rate)} jobs/s`);
      }
    }
  } finally {
    await bouncer?.stop();
  }
  printTable(
    'throughput by worker processes',
    ['store', 'processes', 'jobs/s', 'statements/job', '÷ 1 process', '÷ PostgreSQL straight'],
    rows,
  );
}
