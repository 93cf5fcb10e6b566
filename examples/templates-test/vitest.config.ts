import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    include: ['test/**/*.test.ts'],
    // Packs the @jobs packages once for every test file.
    globalSetup: ['test/global-setup.ts'],
    // Packing, installing and running six projects: generous limits, though a run takes far less.
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
