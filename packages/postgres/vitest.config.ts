import { packageTestProject } from '../../vitest.shared.js';

// Files run side by side, as in every other package: the lease-timing tests that once needed
// them one at a time (multi-process, exclusive races) live in packages/sql-tests now, and the
// rest wait on the server far more than they compute (186 s instead of 291 s, 60 s of CPU).
export default packageTestProject();
