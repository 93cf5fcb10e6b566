import { defineConfig, type Options } from 'tsup';

/**
 * The build every published package shares: ESM + CJS + `.d.ts` of `src/index.ts` for Node 20.
 * A package passes only what it adds, e.g. `shims: true` when it reads `import.meta.url`.
 *
 * @example
 * // packages/<pkg>/tsup.config.ts
 * import { packageBuild } from '../../tsup.shared.js';
 * export default packageBuild({ shims: true });
 */
export function packageBuild(extra: Options = {}): ReturnType<typeof defineConfig> {
  return defineConfig({
    entry: ['src/index.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    sourcemap: true,
    target: 'node20',
    ...extra,
  });
}
