/**
 * How many source files a job's life crosses on PostgreSQL — enqueue, acquire, dispatch, settle
 * — measured, not counted by hand: V8's precise coverage (`node:inspector`) records which
 * functions ran while one job went through a warmed-up engine, and the test counts the files of
 * `@jobs/core` and `@jobs/postgres` they are in (at most 15, so a reader follows a job through a
 * few files). Type-only files run nothing and do not count, nor do constants read from a file.
 * The lease is long, so no renewal or lease recovery falls inside the measured run.
 */
import { Session } from 'node:inspector/promises';
import { JobEngine } from '@jobs/core';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, randomSchema, reachable, sql } from './helpers.js';

const MAX_FILES = 15;
/**
 * The getter the test runner's module transform adds for each import and export (a live
 * binding): reading a constant of another file runs one. Not our code; the build has none.
 */
const TEST_RUNNER_GETTER = /^\(\) => \{ try \{ return [\w$.]+ \} catch \{\} \}$/;
const schema = randomSchema('life');

describe.skipIf(!reachable)('a job’s life on PostgreSQL', () => {
  afterAll(async () => {
    await sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  });

  it(`crosses at most ${MAX_FILES} source files`, async () => {
    const store = openStore(schema, { max: 12 });
    await store.migrate();
    let finished: (() => void) | undefined;
    const engine = new JobEngine({
      store,
      handlers: { w: async () => finished?.() },
      concurrency: 2,
      leaseMs: 300_000,
    });
    await engine.start();
    const runOne = async (payload: unknown): Promise<void> => {
      const done = new Promise<void>((resolve) => {
        finished = resolve;
      });
      await engine.enqueue('w', payload);
      await done;
    };
    const session = new Session();
    session.connect();
    try {
      for (let i = 0; i < 30; i++) await runOne({ warmUp: i });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await session.post('Profiler.enable');
      await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
      await session.post('Profiler.takePreciseCoverage'); // resets the counts
      await runOne({ measured: true });
      await new Promise((resolve) => setTimeout(resolve, 50)); // the completion is written
      const { result } = await session.post('Profiler.takePreciseCoverage');
      await session.post('Debugger.enable');
      const files = new Map<string, string[]>();
      for (const script of result) {
        const file = /\/packages\/((?:core|postgres)\/src\/.+)$/.exec(script.url)?.[1];
        if (file === undefined) continue;
        const ran = script.functions.filter((fn) => (fn.ranges[0]?.count ?? 0) > 0);
        if (ran.length === 0) continue;
        const { scriptSource } = await session.post('Debugger.getScriptSource', {
          scriptId: script.scriptId,
        });
        const ours = ran
          .map((fn) => {
            const range = fn.ranges[0] as { startOffset: number; endOffset: number };
            return fn.functionName || scriptSource.slice(range.startOffset, range.endOffset);
          })
          .filter((code) => !TEST_RUNNER_GETTER.test(code));
        if (ours.length > 0) files.set(file, ours);
      }
      const list = [...files.keys()].sort();
      if (process.env.JOBS_TEST_VERBOSE) console.log(list.join('\n'));
      expect(list.length, `files a job's life crossed:\n${list.join('\n')}`).toBeGreaterThan(5);
      expect(list.length, `files a job's life crossed:\n${list.join('\n')}`).toBeLessThanOrEqual(
        MAX_FILES,
      );
      expect(list).toContain('postgres/src/postgres-store.ts');
    } finally {
      await session.post('Profiler.stopPreciseCoverage').catch(() => {});
      await session.post('Debugger.disable').catch(() => {});
      session.disconnect();
      await engine.stop();
    }
  });
});
