/**
 * What durable steps cost: one engine in this process (default configuration, concurrency 10)
 * drains workflow jobs of 10 memoised no-op steps (`ctx.step('s1', …)` … `'s10'`), and the same
 * number of plain no-op jobs, on SQLite and PostgreSQL, fresh tables per run. Prints jobs/s,
 * steps/s, and round trips per step: the statements the process sent (counted at
 * `pg.Client#query`, at better-sqlite3's statement calls for SQLite) during the drain, less
 * those of the plain drain, ÷ steps run. Plain and workflow runs alternate within a round so
 * drift on a shared machine hits both.
 *
 * With PostgreSQL, DBOS Transact runs the same 10-step workflow in the same run (`dbosRun`;
 * `--no-dbos` leaves it out).
 *
 * `pnpm bench steps [--quick] [sqlite] [postgres] [--no-dbos]` (PostgreSQL at `JOBS_PG_URL`).
 */
import { type JobContext, JobEngine, silentLogger } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import Database from 'better-sqlite3';
import pg from 'pg';
import { type DrainTarget, drainTargets, median, PG_URL } from './drain-targets.js';
import { enqueueInBatches } from './harness.js';

const STEPS = 10;
const CONCURRENCY = 10;

/** Counts every statement this process sends: `pg.Client#query` and better-sqlite3 calls. */
function countStatements(): () => number {
  let count = 0;
  const wrap = (target: Record<string, unknown>, name: string): void => {
    const original = target[name] as (...args: unknown[]) => unknown;
    target[name] = function counted(this: unknown, ...args: unknown[]) {
      count++;
      return original.apply(this, args);
    };
  };
  const probe = new Database(':memory:');
  const statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  const database = Object.getPrototypeOf(probe) as Record<string, unknown>;
  probe.close();
  for (const name of ['run', 'get', 'all', 'iterate']) wrap(statement, name);
  wrap(database, 'exec');
  wrap(pg.Client.prototype as unknown as Record<string, unknown>, 'query');
  return () => count;
}
/** Statements this process sent so far (`pg.Client#query`, better-sqlite3 calls). */
export const statements = countStatements();

async function workflow(_job: unknown, ctx: JobContext): Promise<number> {
  let sum = 0;
  for (let i = 1; i <= STEPS; i++) sum += await ctx.step(`s${i}`, () => i);
  return sum;
}

export interface Run {
  rate: number;
  statements: number;
}

/** One engine draining `jobs` jobs of `handler`, enqueued beforehand on fresh tables. */
async function drain(
  target: DrainTarget,
  jobs: number,
  handler: (job: unknown, ctx: JobContext) => Promise<unknown>,
): Promise<Run> {
  const { store, cleanup } = await target.open();
  try {
    const client = new JobEngine({ store, logger: silentLogger });
    await enqueueInBatches(jobs, (payloads) =>
      client.enqueueMany(payloads.map((payload) => ({ type: 'work', payload }))),
    );
    let done = 0;
    let finished: () => void = () => {};
    const all = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      concurrency: CONCURRENCY,
      handlers: { work: handler },
    });
    engine.on('completed', () => {
      done += 1;
      if (done === jobs) finished();
    });
    engine.on('failed', ({ error }) => {
      throw new Error(`bench steps: a job failed: ${error.message}`);
    });
    const before = statements();
    const started = performance.now();
    await engine.start();
    await all;
    const ms = performance.now() - started;
    const sent = statements() - before;
    await engine.stop();
    return { rate: (jobs / ms) * 1000, statements: sent };
  } finally {
    await store.close();
    await cleanup();
  }
}

/**
 * DBOS Transact on PostgreSQL (its system database in a fresh schema), in this process:
 * `jobs` workflows of `steps` `DBOS.runStep` no-op steps, started by `CONCURRENCY` callers that
 * each run one workflow after the other — a workflow called directly runs at once in this
 * process, DBOS's fastest path (a queue would add its polling interval).
 */
export async function dbosRun(jobs: number, steps: number): Promise<Run> {
  const { DBOS } = await import('@dbos-inc/dbos-sdk');
  const schema = `dbos_bench_${process.pid}_${Date.now()}`;
  DBOS.setConfig({
    name: 'jobs-bench-steps',
    systemDatabaseUrl: PG_URL,
    systemDatabaseSchemaName: schema,
    runAdminServer: false,
    logLevel: 'error',
  });
  const run = DBOS.registerWorkflow(
    async (_i: number) => {
      let sum = 0;
      for (let k = 1; k <= steps; k++) sum += await DBOS.runStep(async () => k, { name: `s${k}` });
      return sum;
    },
    { name: `steps${steps}` },
  );
  await DBOS.launch();
  try {
    let next = 0;
    const before = statements();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < jobs) await run(next++);
      }),
    );
    const ms = performance.now() - started;
    return { rate: (jobs / ms) * 1000, statements: statements() - before };
  } finally {
    await DBOS.shutdown({ deregister: true });
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end());
  }
}

/** PostgreSQL in the store's default configuration (its default pool of 10), a fresh schema. */
export const defaultPostgres: DrainTarget = {
  name: 'postgres',
  async open() {
    const schema = `bench_steps_${process.pid}_${Date.now()}`;
    const store = new PostgresJobStore({ connectionString: PG_URL, schema });
    await store.migrate();
    return {
      store,
      cleanup: async () => {
        const admin = new pg.Client({ connectionString: PG_URL });
        await admin.connect();
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end());
      },
    };
  },
};

export async function runStepsBench(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const JOBS = quick ? 500 : 2_000;
  const ROUNDS = quick ? 1 : 3;
  const named = argv.filter((arg) => !arg.startsWith('-'));
  const targets = drainTargets('steps')
    .map((target) => (target.name === 'postgres' ? defaultPostgres : target))
    .filter((target) => named.length === 0 || named.includes(target.name));
  const plain = async () => undefined;
  console.log(
    `steps: ${JOBS} jobs of ${STEPS} no-op steps vs ${JOBS} plain no-op jobs, one engine, concurrency ${CONCURRENCY}, default configuration; ${ROUNDS} round(s), medians`,
  );
  console.log(
    '  store      workflow jobs/s   steps/s   plain jobs/s   statements/job (workflow, plain)   round trips/step',
  );
  for (const target of targets) {
    const workflows: Run[] = [];
    const plains: Run[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // Alternate which goes first.
        if (round % 2 === 0) {
          workflows.push(await drain(target, JOBS, workflow));
          plains.push(await drain(target, JOBS, plain));
        } else {
          plains.push(await drain(target, JOBS, plain));
          workflows.push(await drain(target, JOBS, workflow));
        }
      }
    } catch (error) {
      console.log(`  ${target.name}: skipped (${(error as Error).message})`);
      continue;
    }
    print(target.name, workflows, plains, JOBS);
  }
  if (targets.some((t) => t.name === 'postgres') && !argv.includes('--no-dbos')) {
    const workflows: Run[] = [];
    const plains: Run[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        workflows.push(await dbosRun(JOBS, STEPS));
        plains.push(await dbosRun(JOBS, 0));
      }
      print('DBOS (pg)', workflows, plains, JOBS);
    } catch (error) {
      console.log(`  DBOS: skipped (${(error as Error).message})`);
    }
  }
  console.log(
    '  round trips/step: (statements per workflow job − per plain job) ÷ 10, counted at pg.Client#query / better-sqlite3 (SQLite: in-process calls, not network round trips); DBOS\'s "plain job" is a workflow of no steps',
  );
}

function print(name: string, workflows: Run[], plains: Run[], JOBS: number): void {
  {
    const rate = median(workflows.map((r) => r.rate));
    const plainRate = median(plains.map((r) => r.rate));
    const perJob = median(workflows.map((r) => r.statements)) / JOBS;
    const plainPerJob = median(plains.map((r) => r.statements)) / JOBS;
    console.log(
      `  ${name.padEnd(9)}  ${String(Math.round(rate)).padStart(15)}  ${String(Math.round(rate * STEPS)).padStart(8)}  ${String(Math.round(plainRate)).padStart(13)}   ${perJob.toFixed(2).padStart(14)}, ${plainPerJob.toFixed(2).padEnd(17)}   ${((perJob - plainPerJob) / STEPS).toFixed(2).padStart(16)}`,
    );
  }
}
