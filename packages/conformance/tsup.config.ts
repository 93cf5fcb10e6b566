import { packageBuild } from '../../tsup.shared.js';

export default packageBuild({
  // import.meta.url in the CJS build (the runner script is found relative to it).
  shims: true,
  external: ['vitest'],
});
