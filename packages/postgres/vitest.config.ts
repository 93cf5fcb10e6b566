import { defineProject } from 'vitest/config';
import { workspaceAliases } from '../../vitest.shared.js';

export default defineProject({
  resolve: { alias: workspaceAliases },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Files run one after another: the multi-process and engine tests use short leases (300-500
    // ms), and a 2-core CI box running the conformance suite's many connections alongside them
    // can delay heartbeats past a lease. One at a time keeps lease timing honest.
    fileParallelism: false,
  },
});
