/**
 * The tests run the built binary, as users do. CI builds everything first (`pnpm build`); a
 * local run rebuilds this package when its sources are newer than `dist/bin.js`. The store
 * packages the binary imports must be built already.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

export default function setup(): void {
  for (const pkg of ['core', 'dashboard', 'postgres', 'mysql', 'sqlite']) {
    if (!existsSync(join(root, '..', pkg, 'dist', 'index.js'))) {
      throw new Error(
        `@jobs/cli tests run the built binary: build @jobs/${pkg} first (\`npx -y pnpm@10.34.9 build\` at the root)`,
      );
    }
  }
  const bin = join(root, 'dist', 'bin.js');
  const sources = Math.max(
    newestSource(join(root, 'src')),
    statSync(join(root, 'package.json')).mtimeMs,
  );
  if (!existsSync(bin) || statSync(bin).mtimeMs < sources) {
    execFileSync('npx', ['tsup'], { cwd: root, stdio: 'inherit' });
  }
}
