import { packageTestProject } from '../../vitest.shared.js';

export default packageTestProject({
  // Files run one after another: the multi-process and engine tests use short leases (300-500
  // ms), and a 2-core CI box running the conformance suite's many connections alongside them
  // can delay heartbeats past a lease. One at a time keeps lease timing honest.
  fileParallelism: false,
});
