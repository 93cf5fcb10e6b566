import { packageBuild } from '../../tsup.shared.js';

// `import.meta.url` locates the shipped migrations/ directory; shim it in the CJS build.
export default packageBuild({ shims: true });
