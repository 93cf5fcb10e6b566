import { packageBuild } from '../../tsup.shared.js';

// `text` is its own entry (`@jobs/dashboard/text`): the CLI formats with it without loading the
// dashboard.
export default packageBuild({ entry: ['src/index.ts', 'src/text.ts'] });
