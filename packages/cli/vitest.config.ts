import { packageTestProject } from '../../vitest.shared.js';

// The test files spawn the built binary many times each: one file at a time keeps the two cores
// for the child processes and the databases.
export default packageTestProject({
  fileParallelism: false,
  globalSetup: ['./test/global-setup.ts'],
});
