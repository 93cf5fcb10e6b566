import { packageBuild } from '../../tsup.shared.js';

// `client` is its own entry (`@jobs/http/client`): it uses only `fetch`, so it runs in Node, Deno
// and browsers without the server's node: imports.
export default packageBuild({ entry: ['src/index.ts', 'src/client.ts'] });
