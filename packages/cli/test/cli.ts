/** Runs the built `jobsctl` binary as a child process, as an operator would. */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../dist/bin.js', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a child: the test's, without a database URL the test did not choose. */
function childEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const base = { ...process.env };
  delete base.JOBS_DATABASE_URL;
  return { ...base, ...env };
}

/** Runs `jobs <args>` to its end. */
export function jobs(args: readonly string[], env?: Record<string, string>): Promise<CliResult> {
  return run(process.execPath, [BIN, ...args], env);
}

/** A word for `sh -c`. */
export function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Runs a program to its end. */
export function run(
  program: string,
  args: readonly string[],
  env?: Record<string, string>,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      env: childEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs `jobs <args>`, expects exit code 0 and returns stdout. */
export async function ok(args: readonly string[], env?: Record<string, string>): Promise<string> {
  const result = await jobs(args, env);
  if (result.code !== 0) {
    throw new Error(
      `jobsctl ${args.join(' ')} exited with ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`,
    );
  }
  return result.stdout;
}

/** Runs `jobs <args> --json` and parses what it printed. */
export async function json<T = unknown>(args: readonly string[]): Promise<T> {
  return JSON.parse(await ok([...args, '--json'])) as T;
}

/** A long-running `jobsctl` (tail): its output lines as they come, and a way to stop it. */
export class RunningCli {
  readonly lines: string[] = [];
  stderr = '';
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;
  private waiters: (() => void)[] = [];

  constructor(args: readonly string[]) {
    this.child = spawn(process.execPath, [BIN, ...args], {
      env: childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let partial = '';
    this.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      this.lines.push(...parts);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
    void this.exited.then(() => {
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /**
   * The first line that `match` accepts. Fails, showing what was printed, when the process ends
   * first or after `timeoutMs` (well below the test's limit, so the failure says what is missing).
   */
  async waitForLine(
    match: (line: string) => boolean,
    what = 'the expected line',
    timeoutMs = 20_000,
  ): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find(match);
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (this.child.exitCode !== null || this.child.signalCode !== null || left <= 0) {
        throw new Error(
          `jobsctl ${this.child.exitCode === null ? 'printed no' : 'exited before'} ${what}; it printed:\n${this.lines.join('\n')}\nstderr: ${this.stderr}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Sends SIGTERM and returns the exit code. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}
