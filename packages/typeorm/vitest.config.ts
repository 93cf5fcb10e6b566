import { defineProject } from 'vitest/config';
import { workspaceAliases } from '../../vitest.shared.js';

export default defineProject({
  resolve: { alias: workspaceAliases },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
