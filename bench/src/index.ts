/**
 * `pnpm bench [sqlite|postgres|mysql|typeorm ...] [--quick]`: runs the chosen suites (default:
 * all of them; a suite whose database is unreachable reports that and is skipped) and prints a
 * table per suite with ratios ours ÷ theirs. `pnpm bench plans …` prints the hot statements'
 * query plans instead (`plans.ts`); `pnpm bench baseline …` runs each store as of v1 (before the
 * SQL core) against today's (`baseline.ts`); `pnpm bench flow …` what scope limits and rate
 * limits cost against plain jobs (`flow-limits.ts`); `pnpm bench due …` only the due-time lateness
 * line of each store (`due-time.ts`); `pnpm bench sql-enqueue …` enqueue from SQL against
 * `engine.enqueue` (`sql-enqueue.ts`); `pnpm bench external …` remote workers over HTTP against
 * native handlers (`external-workers.ts`); `pnpm bench steps …` workflows of 10 durable steps
 * against plain jobs: jobs/s and round trips per step (`steps.ts`); `pnpm bench workflows …`
 * 3-step and fan-out-of-10 workflows per store, with DBOS (`workflows.ts`); `pnpm bench scale …` idle
 * nodes on PostgreSQL: idle cost, statements and pickup per enqueue, the notify lock (`scale.ts`);
 * `pnpm bench processes …` 1, 2 and 4 worker processes on PostgreSQL, through PgBouncer and on
 * MySQL (`processes.ts`); `pnpm bench long-tx …` a PostgreSQL drain beside a session idle in
 * its transaction (`long-tx.ts`); `pnpm bench prune …` history's retention, a day dropped whole
 * against records deleted row by row (`prune.ts`).
 */
import { type BenchOptions, type BenchReport, type BenchSuite, printReport } from './harness.js';

const SUITES = {
  sqlite: { file: './sqlite.js', exportName: 'runSqliteBench' },
  postgres: { file: './postgres.js', exportName: 'runPostgresBench' },
  mysql: { file: './mysql.js', exportName: 'runMysqlBench' },
  typeorm: { file: './typeorm.js', exportName: 'runTypeormBench' },
} as const;
type SuiteName = keyof typeof SUITES;

function parseArgs(argv: readonly string[]): { suites: SuiteName[]; options: BenchOptions } {
  const names: SuiteName[] = [];
  let quick = false;
  for (const arg of argv) {
    if (arg === '--') continue;
    if (arg === '--quick') quick = true;
    else if (arg in SUITES) names.push(arg as SuiteName);
    else {
      console.error(
        `unknown argument ${JSON.stringify(arg)}; usage: pnpm bench [${Object.keys(SUITES).join('|')} ...] [--quick]`,
      );
      process.exit(2);
    }
  }
  return {
    suites: names.length ? names : (Object.keys(SUITES) as SuiteName[]),
    options: { quick },
  };
}

async function loadSuite(name: SuiteName): Promise<BenchSuite | string> {
  const { file, exportName } = SUITES[name];
  let mod: Record<string, unknown>;
  try {
    mod = (await import(file)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && String(error).includes(file.slice(2, -3))) {
      return `bench/src/${file.slice(2, -3)}.ts does not exist yet`;
    }
    throw error;
  }
  const fn = mod[exportName];
  if (typeof fn !== 'function') return `${file} does not export ${exportName} yet`;
  return fn as BenchSuite;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2).filter((arg) => arg !== '--');
  if (argv[0] === 'plans') {
    // `pnpm bench plans [postgres|mysql|sqlite] [--rows N]`: query plans, see plans.ts.
    const { runPlans } = await import('./plans.js');
    await runPlans(argv.slice(1));
    return;
  }
  if (argv[0] === 'baseline') {
    // `pnpm bench baseline [sqlite|postgres|mysql|typeorm ...] [--quick]`: v1 vs now, see baseline.ts.
    const { runBaseline } = await import('./baseline.js');
    await runBaseline(argv.slice(1));
    return;
  }
  if (argv[0] === 'due') {
    // `pnpm bench due [sqlite|postgres|mysql ...] [--quick]`: due-time lateness, see due-time.ts.
    const { runDueTime } = await import('./due-time.js');
    await runDueTime(argv.slice(1));
    return;
  }
  if (argv[0] === 'flow') {
    // `pnpm bench flow [--quick] [sqlite] [postgres] [mysql]`: scope and rate limits ÷ plain jobs.
    const { runFlowLimits } = await import('./flow-limits.js');
    await runFlowLimits(argv.slice(1));
    return;
  }
  if (argv[0] === 'external') {
    // `pnpm bench external [--quick] [sqlite] [postgres] [mysql]`: HTTP workers ÷ native.
    const { runExternalWorkersBench } = await import('./external-workers.js');
    await runExternalWorkersBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'steps') {
    // `pnpm bench steps [--quick] [sqlite] [postgres]`: 10-step workflows ÷ plain jobs.
    const { runStepsBench } = await import('./steps.js');
    await runStepsBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'workflows') {
    // `pnpm bench workflows [--quick] [sqlite] [postgres] [mysql] [typeorm]`: 3-step and fan-out workflows.
    const { runWorkflowsBench } = await import('./workflows.js');
    await runWorkflowsBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'scale') {
    // `pnpm bench scale [--quick] [--nodes 1,10,25]`: idle nodes on PostgreSQL, see scale.ts.
    const { runScaleBench } = await import('./scale.js');
    await runScaleBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'processes') {
    // `pnpm bench processes [--quick] [--procs 1,2,4] [--rounds N] [postgres] [pgbouncer] [mysql]`.
    const { runProcessesBench } = await import('./processes.js');
    await runProcessesBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'long-tx') {
    // `pnpm bench long-tx [--seconds 300] [--quick]`: a drain beside an idle transaction.
    const { runLongTxBench } = await import('./long-tx.js');
    await runLongTxBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'prune') {
    // `pnpm bench prune [--quick] [--records N] [postgres] [mysql] [sqlite]`: history retention.
    const { runPruneBench } = await import('./prune.js');
    await runPruneBench(argv.slice(1));
    return;
  }
  if (argv[0] === 'sql-enqueue') {
    // `pnpm bench sql-enqueue [--quick] [sqlite] [postgres] [mysql]`: SQL ÷ engine.enqueue.
    const { runSqlEnqueueBench } = await import('./sql-enqueue.js');
    await runSqlEnqueueBench(argv.slice(1));
    return;
  }
  const { suites, options } = parseArgs(process.argv.slice(2));
  const reports: BenchReport[] = [];
  const skipped: string[] = [];
  for (const name of suites) {
    const suite = await loadSuite(name);
    if (typeof suite === 'string') {
      skipped.push(`${name}: skipped (${suite})`);
      console.log(`\n[bench] ${name}: skipped (${suite})`);
      continue;
    }
    console.log(`\n[bench] ${name}${options.quick ? ' (quick)' : ''} ...`);
    try {
      const result = await suite(options);
      for (const report of Array.isArray(result) ? result : [result]) {
        reports.push(report);
        printReport(report);
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // The first line only: a stack trace names connect() and Connection.* of any error.
      if (/ECONNREFUSED|ENOTFOUND|connect/i.test(message.split('\n')[0] ?? '')) {
        skipped.push(`${name}: skipped (database unreachable: ${message})`);
        console.log(`[bench] ${name}: skipped (database unreachable: ${message})`);
      } else throw error;
    }
  }
  if (reports.length > 1 || skipped.length) {
    console.log('\n==================== summary ====================');
    for (const report of reports) printReport(report);
    for (const line of skipped) console.log(line);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
