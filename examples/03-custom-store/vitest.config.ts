import { packageTestProject } from '../../vitest.shared.js';

export default packageTestProject({
  // The durability and demo tests start child processes; running them beside the conformance
  // suite's lease timings would only add noise on a 2-core CI machine.
  fileParallelism: false,
});
