/**
 * The smallest real app: a SQLite store, its migrations, one job run by an engine, a health
 * check, a clean stop. The templates test runs it three ways: compiled as ESM, compiled as
 * CommonJS, and bundled by esbuild into one file that runs where no @jobs package is installed.
 *
 * Usage: node <built app> <database file> <label>
 */
import { type Job, JobEngine, silentLogger } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';

async function main(filename: string, label: string): Promise<void> {
  const store = new SqliteJobStore({ filename });
  await store.migrate();
  let greeted: (greeting: string) => void = () => {};
  const greeting = new Promise<string>((resolve) => {
    greeted = resolve;
  });
  const engine = new JobEngine({
    store,
    logger: silentLogger,
    handlers: {
      greet: (job: Job<{ name: string }>) => greeted(`hello, ${job.payload.name}`),
    },
  });
  await engine.start();
  await engine.enqueue('greet', { name: label });
  const said = await greeting;
  const health = await engine.health();
  await engine.stop({ timeoutMs: 5_000 });
  await store.close();
  console.log(`${label}: ${said}; health ok: ${health.ok}`);
}

const [filename = 'jobs.db', label = 'app'] = process.argv.slice(2);
main(filename, label).catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
