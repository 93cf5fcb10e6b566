import { packageBuild } from '../../tsup.shared.js';

// `import.meta.url` locates the shipped `migrations/` folder; shims provide it in the CJS build.
export default packageBuild({ shims: true });
