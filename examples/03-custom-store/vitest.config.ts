import { defineProject } from 'vitest/config';
import { workspaceAliases } from '../../vitest.shared.js';

export default defineProject({
  resolve: { alias: workspaceAliases },
  test: {
    include: ['test/**/*.test.ts'],
    // The durability and demo tests start child processes; running them beside the conformance
    // suite's lease timings would only add noise on a 2-core CI machine.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
