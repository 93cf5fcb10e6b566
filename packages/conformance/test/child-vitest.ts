/**
 * Runs vitest in a child process on a file under `test/fixtures/` (`*.suite.ts`, which the
 * package's own run leaves out) and reads its JSON report: for tests about what the suite
 * itself reports, pass or fail.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));
/** vitest's own command (its `bin`), next to its package.json. */
const VITEST = fileURLToPath(new URL('vitest.mjs', import.meta.resolve('vitest/package.json')));
const CONFIG = 'test/fixtures/suite.config.ts';

export interface Outcome {
  status: string;
  failureMessages: string[];
}

/**
 * The outcome of every test in `file` (e.g. `test/fixtures/broken-stores.suite.ts`), keyed
 * `<outermost describe> › <test title>`.
 */
export async function runChildVitest(
  file: string,
  options: { titles?: readonly string[]; env?: Record<string, string | undefined> } = {},
): Promise<Map<string, Outcome>> {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-child-vitest-'));
  const outputFile = join(dir, 'report.json');
  const args = [VITEST, 'run', file, '--config', CONFIG, '--reporter=json'];
  args.push(`--outputFile=${outputFile}`);
  if (options.titles) {
    const escaped = options.titles.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    args.push('--testNamePattern', escaped.join('|'));
  }
  const child = spawn(process.execPath, args, {
    cwd: PACKAGE,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-8_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', () => resolve());
    });
    let report: {
      testResults: {
        assertionResults: (Outcome & { ancestorTitles: string[]; title: string })[];
      }[];
    };
    try {
      report = JSON.parse(readFileSync(outputFile, 'utf8'));
    } catch (error) {
      throw new Error(`the child vitest wrote no report (${String(error)}):\n${output}`);
    }
    const outcomes = new Map<string, Outcome>();
    for (const result of report.testResults.flatMap((f) => f.assertionResults)) {
      outcomes.set(`${result.ancestorTitles[0] ?? ''} › ${result.title}`, result);
    }
    return outcomes;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
