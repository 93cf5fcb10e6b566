import { packageTestProject } from '../../vitest.shared.js';

export default packageTestProject({
  // vitest's own defaults, not the workspace's minute: the conformance suite sets the time
  // limit of every test and hook itself, and the tests here prove it does (a store calling
  // `runJobStoreConformance` must not need to raise these).
  testTimeout: 5_000,
  hookTimeout: 10_000,
});
