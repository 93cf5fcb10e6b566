import { packageBuild } from '../../tsup.shared.js';

// A command, not a library: one ESM entry with its shebang, no type declarations. The stores
// are imported on demand, so a PostgreSQL user never loads better-sqlite3's native module.
export default packageBuild({ entry: ['src/bin.ts'], format: ['esm'], dts: false });
