import { packageBuild } from '../../tsup.shared.js';

// Two entry points, `@jobs/core` and `@jobs/core/sql`, sharing chunks in both formats so a
// class (errors, stores) exists once and `instanceof` holds across them. Migration files are
// embedded as text: a bundled app needs no migrations folder at run time.
export default packageBuild({
  entry: { index: 'src/index.ts', 'sql/index': 'src/sql/index.ts' },
  splitting: true,
  loader: { '.sql': 'text' },
});
