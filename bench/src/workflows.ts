/**
 * What durable workflows cost per store (issue 25): one engine in this process (default
 * configuration, concurrency 10) drains, on fresh tables,
 * - **3-step**: workflow jobs of three memoised no-op steps (`ctx.step('s1', …)` … `'s3'`);
 * - **fan-out 10**: workflow jobs that fan out ten no-op child jobs (`Promise.all` of
 *   `ctx.run`) and resume once when all ended;
 * - **plain**: as many plain no-op jobs, the baseline of the round trips.
 * on SQLite, PostgreSQL, MySQL/MariaDB and TypeORM (on PostgreSQL). Prints workflows/s, round trips per step (per child
 * for the fan-out): the statements the process sent during the drain — at `pg.Client#query`,
 * better-sqlite3's statement calls (in-process calls, not network round trips) and writes on
 * sockets to the MySQL server — less the plain drain's, ÷ steps (children) run; and the
 * engine's heap: its peak during the drain (sampled every 50 ms) and what is left after a full
 * collection at the end. With PostgreSQL, DBOS Transact runs the same 3-step workflow in the
 * same run (`dbosRun` of `steps.ts`; `--no-dbos` leaves it out).
 *
 * `pnpm bench workflows [--quick] [sqlite] [postgres] [mysql] [typeorm] [--no-dbos]`.
 */
import 'reflect-metadata';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type JobContext, JobEngine, silentLogger } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { TypeormJobStore } from '@jobs/typeorm';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { type DrainTarget, drainTargets, median, PG_URL } from './drain-targets.js';
import { countSocketWrites, enqueueInBatches } from './harness.js';
import { dbosRun, defaultPostgres, type Run, statements } from './steps.js';

const CONCURRENCY = 10;
const STEPS = 3;
const CHILDREN = 10;
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const mysqlWrites = countSocketWrites(Number(new URL(MYSQL_URL).port || 3306));
/** Every statement this process sent so far, on any of the three databases. */
const sent = (): number => statements() + mysqlWrites();

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const mib = (bytes: number): number => bytes / (1024 * 1024);

type Scenario = 'plain' | '3-step' | 'fan-out 10';

const HANDLERS: Record<Scenario, (job: unknown, ctx: JobContext) => Promise<unknown>> = {
  plain: async () => undefined,
  '3-step': async (_job, ctx) => {
    let sum = 0;
    for (let i = 1; i <= STEPS; i++) sum += await ctx.step(`s${i}`, () => i);
    return sum;
  },
  'fan-out 10': async (_job, ctx) =>
    Promise.all(Array.from({ length: CHILDREN }, (_, i) => ctx.run(`c${i}`, 'leaf', { i }))),
};

interface Drain {
  rate: number;
  statements: number;
  heapPeakMb: number;
  heapAfterGcMb: number;
}

/** MySQL/MariaDB in the store's default configuration (its default pool), a fresh database. */
const defaultMysql: DrainTarget = {
  name: 'mysql',
  async open() {
    const database = `bench_wf_${process.pid}_${Date.now()}`;
    const admin = await mysql.createConnection({ uri: MYSQL_URL });
    await admin.query(`CREATE DATABASE \`${database}\``).finally(() => admin.end());
    const store = new MysqlJobStore({ uri: MYSQL_URL, database });
    await store.migrate();
    return {
      store,
      cleanup: async () => {
        const drop = await mysql.createConnection({ uri: MYSQL_URL });
        await drop.query(`DROP DATABASE IF EXISTS \`${database}\``).finally(() => drop.end());
      },
    };
  },
};

/** TypeORM on PostgreSQL (a pool of 10, as the native store's default), a fresh schema. */
const typeormPostgres: DrainTarget = {
  name: 'typeorm',
  async open() {
    const schema = `bench_wf_typeorm_${process.pid}_${Date.now()}`;
    const dataSource = new DataSource({
      type: 'postgres',
      url: PG_URL,
      schema,
      extra: { max: 10 },
    });
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
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

/** One engine draining `jobs` workflow jobs of `scenario`, enqueued beforehand. */
async function drain(target: DrainTarget, jobs: number, scenario: Scenario): Promise<Drain> {
  const { store, cleanup } = await target.open();
  try {
    const client = new JobEngine({ store, logger: silentLogger });
    await enqueueInBatches(jobs, (payloads) =>
      client.enqueueMany(payloads.map((payload) => ({ type: 'work', payload }))),
    );
    let done = 0;
    let finished: () => void = () => {};
    let failed: (error: Error) => void = () => {};
    const all = new Promise<void>((resolve, reject) => {
      finished = resolve;
      failed = reject;
    });
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      concurrency: CONCURRENCY,
      handlers: { work: HANDLERS[scenario], leaf: async () => 1 },
    });
    engine.on('completed', ({ job }) => {
      if (job.type === 'work' && ++done === jobs) finished();
    });
    engine.on('failed', ({ error }) =>
      failed(new Error(`bench workflows: a job failed: ${error.message}`)),
    );
    gc();
    let heapPeak = process.memoryUsage().heapUsed;
    const sampler = setInterval(() => {
      heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
    }, 50);
    const before = sent();
    const started = performance.now();
    await engine.start();
    await all;
    const ms = performance.now() - started;
    const statementsSent = sent() - before;
    clearInterval(sampler);
    gc();
    const heapAfterGc = process.memoryUsage().heapUsed;
    await engine.stop();
    return {
      rate: (jobs / ms) * 1000,
      statements: statementsSent,
      heapPeakMb: mib(heapPeak),
      heapAfterGcMb: mib(heapAfterGc),
    };
  } finally {
    await store.close();
    await cleanup();
  }
}

export async function runWorkflowsBench(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const JOBS = quick ? 300 : 2_000;
  const FAN_OUTS = quick ? 50 : 300;
  const ROUNDS = quick ? 1 : 3;
  const named = argv.filter((arg) => !arg.startsWith('-'));
  const targets = [...drainTargets('wf').filter((t) => t.name === 'sqlite'), defaultPostgres]
    .concat(defaultMysql, typeormPostgres)
    .filter((target) => named.length === 0 || named.includes(target.name));
  console.log(
    `workflows: ${JOBS} jobs of ${STEPS} no-op steps, ${FAN_OUTS} fan-outs of ${CHILDREN} no-op children, ${JOBS} plain no-op jobs; one engine in this process, concurrency ${CONCURRENCY}, default configuration; ${ROUNDS} round(s), medians`,
  );
  console.log(
    '  store      scenario     workflows/s   steps/s   statements/workflow   round trips/step   heap peak MiB   heap after GC MiB',
  );
  const threeStep: { name: string; runs: Drain[] }[] = [];
  for (const target of targets) {
    const runs: Record<Scenario, Drain[]> = { plain: [], '3-step': [], 'fan-out 10': [] };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // Rotate which goes first, so drift on a shared machine hits each alike.
        const order: Scenario[] = ['plain', '3-step', 'fan-out 10'];
        for (let k = 0; k < round % 3; k++) order.push(order.shift() as Scenario);
        for (const scenario of order) {
          runs[scenario].push(
            await drain(target, scenario === 'fan-out 10' ? FAN_OUTS : JOBS, scenario),
          );
        }
      }
    } catch (error) {
      console.log(`  ${target.name}: skipped (${(error as Error).message})`);
      continue;
    }
    const plainPerJob = median(runs.plain.map((r) => r.statements)) / JOBS;
    print(target.name, 'plain', runs.plain, JOBS, 0, plainPerJob);
    print(target.name, '3-step', runs['3-step'], JOBS, STEPS, plainPerJob);
    print(target.name, 'fan-out 10', runs['fan-out 10'], FAN_OUTS, CHILDREN, plainPerJob);
    threeStep.push({ name: target.name, runs: runs['3-step'] });
  }
  if (targets.some((t) => t.name === 'postgres') && !argv.includes('--no-dbos')) {
    const workflows: Run[] = [];
    const plains: Run[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        workflows.push(await dbosRun(JOBS, STEPS));
        plains.push(await dbosRun(JOBS, 0));
      }
      const plainPerJob = median(plains.map((r) => r.statements)) / JOBS;
      const unmeasured = (r: Run): Drain => ({
        ...r,
        heapPeakMb: Number.NaN,
        heapAfterGcMb: Number.NaN,
      });
      print('DBOS (pg)', 'plain', plains.map(unmeasured), JOBS, 0, plainPerJob);
      print('DBOS (pg)', '3-step', workflows.map(unmeasured), JOBS, STEPS, plainPerJob);
      const ours = threeStep.find((r) => r.name === 'postgres');
      if (ours) {
        const ratio = median(ours.runs.map((r) => r.rate)) / median(workflows.map((r) => r.rate));
        console.log(
          `  3-step on PostgreSQL, ours ÷ DBOS: ${ratio.toFixed(2)}× workflows/s (target ≥ 2×)`,
        );
      }
    } catch (error) {
      console.log(`  DBOS: skipped (${(error as Error).message})`);
    }
  }
  console.log(
    '  round trips/step: (statements per workflow − per plain job) ÷ steps (÷ children for the fan-out, whose children run as jobs of their own), counted at pg.Client#query / better-sqlite3 (SQLite: in-process calls) / writes to the MySQL socket; DBOS\'s "plain" is a workflow of no steps; heap: this process (engine and bench), DBOS\'s not measured',
  );
}

function print(
  name: string,
  scenario: string,
  runs: Drain[],
  jobs: number,
  per: number,
  plainPerJob: number,
): void {
  const rate = median(runs.map((r) => r.rate));
  const perJob = median(runs.map((r) => r.statements)) / jobs;
  const perStep = per === 0 ? '' : ((perJob - plainPerJob) / per).toFixed(2);
  const heap = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : '—');
  console.log(
    `  ${name.padEnd(9)}  ${scenario.padEnd(11)}  ${String(Math.round(rate)).padStart(11)}  ${String(per === 0 ? '' : Math.round(rate * per)).padStart(8)}  ${perJob.toFixed(2).padStart(20)}  ${perStep.padStart(17)}  ${heap(median(runs.map((r) => r.heapPeakMb))).padStart(14)}  ${heap(median(runs.map((r) => r.heapAfterGcMb))).padStart(18)}`,
  );
}
