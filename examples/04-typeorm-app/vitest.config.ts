import { defineProject } from 'vitest/config';

export default defineProject({
  // Each test runs the shop on a real database, some start the example as a child process.
  test: { include: ['test/**/*.test.ts'], testTimeout: 90_000, hookTimeout: 60_000 },
});
