import { packageTestProject } from '../../vitest.shared.js';

// One browser and one engine per file; one file at a time keeps the two cores for them.
export default packageTestProject({ fileParallelism: false });
