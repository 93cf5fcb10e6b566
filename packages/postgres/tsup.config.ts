import { packageBuild } from '../../tsup.shared.js';

// import.meta.url in the CJS build: the migrations folder is found relative to the file.
export default packageBuild({ shims: true });
