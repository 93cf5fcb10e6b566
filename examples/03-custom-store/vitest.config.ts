import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    include: ['test/**/*.test.ts'],
    // Real files, fsyncs and child processes: a minute per test and hook.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The durability and demo tests start child processes; running them beside the conformance
    // suite's lease timings would only add noise on a 2-core CI machine.
    fileParallelism: false,
  },
});
