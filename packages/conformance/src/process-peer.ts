/**
 * Child processes that open the store through `processPeer` and race the test's own peers
 * (the runner is `runner/acquire-peer.mjs`, shipped with this package).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProcessPeerSpec } from './options.js';

/** Path of a runner script, found next to `src/` or `dist/` whichever this code runs from. */
export function runnerPath(
  name:
    | 'acquire-peer.mjs'
    | 'engine-peer.mjs'
    | 'schedule-peer.mjs'
    | 'chaos-worker.mjs'
    | 'cancel-peer.mjs',
): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const candidate = join(dir, 'runner', name);
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error(`[@jobs/conformance] cannot find runner/${name}`);
}

export function acquirePeerRunnerPath(): string {
  return runnerPath('acquire-peer.mjs');
}

export interface AcquirePeerConfig {
  owner: string;
  types: string[];
  limit: number;
  leaseMs: number;
  /** Acquires in a row that return nothing before the child stops. */
  idlePolls: number;
}

export interface AcquirePeerProcess {
  /** Resolves when the child opened its store. */
  ready: Promise<void>;
  /** Starts the race. */
  go(): void;
  /** Ids the child acquired (after it exits). */
  result: Promise<string[]>;
}

/** Spawns one acquiring child process. */
export function spawnAcquirePeer(
  spec: ProcessPeerSpec,
  config: AcquirePeerConfig,
): AcquirePeerProcess {
  const payload = JSON.stringify({ module: spec.module, args: spec.args ?? null, ...config });
  const child = spawn(
    process.execPath,
    [...(spec.nodeArgs ?? []), acquirePeerRunnerPath(), payload],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    stdout += chunk;
    if (stdout.includes('"ready":true')) onReady();
  });
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const result = new Promise<string[]>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = stdout
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l.startsWith('{"ids"'));
      if (code !== 0 || !line) {
        reject(
          new Error(
            `[@jobs/conformance] process peer ${config.owner} exited with ${code}: ${stderr.trim() || stdout.trim()}`,
          ),
        );
        return;
      }
      resolve((JSON.parse(line) as { ids: string[] }).ids);
    });
  });
  // A child that dies before it is ready must fail the test, not hang it.
  const readyOrDead = Promise.race([ready, result.then(() => undefined)]);
  return {
    ready: readyOrDead,
    go: () => {
      child.stdin.write('go\n');
      child.stdin.end();
    },
    result,
  };
}

export interface EnginePeerConfig {
  type: string;
  concurrency: number;
  prefetch: number;
  leaseMs: number;
}

export interface EnginePeerProcess {
  /** Resolves when the child's engine runs. */
  ready: Promise<void>;
  /** Ids of the jobs whose handler started in the child so far. */
  started(): string[];
  /** Kills the child with SIGKILL (a crash: no shutdown, no release) and waits for it to exit. */
  kill(): Promise<void>;
}

/** Spawns a child process running a JobEngine on the store, for crash tests. */
export function spawnEnginePeer(
  spec: ProcessPeerSpec,
  config: EnginePeerConfig,
): EnginePeerProcess {
  const payload = JSON.stringify({ module: spec.module, args: spec.args ?? null, ...config });
  const child = spawn(
    process.execPath,
    [...(spec.nodeArgs ?? []), runnerPath('engine-peer.mjs'), payload],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  const started: string[] = [];
  let onReady: () => void = () => {};
  let onFail: (error: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    onReady = resolve;
    onFail = reject;
  });
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    stdout += chunk;
    const lines = stdout.split('\n');
    stdout = lines.pop() ?? '';
    for (const line of lines) {
      if (line.includes('"ready":true')) onReady();
      const match = /"started":"([^"]+)"/.exec(line);
      if (match?.[1]) started.push(match[1]);
    }
  });
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') {
        onFail(new Error(`[@jobs/conformance] engine peer exited with ${code}: ${stderr.trim()}`));
      }
      resolve();
    });
  });
  child.on('error', (error) => onFail(error));
  return {
    ready,
    started: () => [...started],
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
