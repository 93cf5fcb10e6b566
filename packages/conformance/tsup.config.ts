import { packageBuild } from '../../tsup.shared.js';

// ESM only: the suite imports vitest, which cannot be require()d, so a CJS build could only
// throw. vitest stays external: the suite runs on the user's own vitest.
export default packageBuild({ format: ['esm'], external: ['vitest'] });
