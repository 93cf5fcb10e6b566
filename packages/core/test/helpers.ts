/**
 * What core's own tests share. (Store packages use `@jobs/conformance`'s helpers; core cannot,
 * since the conformance suite depends on core.)
 */
import { afterEach } from 'vitest';
import { JobEngine, type NewJob } from '../src/index.js';

/** A valid `NewJob` of type `work`: due now, priority 0, 3 retries, queue `default`. */
export function newJob(overrides: Partial<NewJob> = {}): NewJob {
  return {
    type: 'work',
    payload: { n: 1 },
    dueAt: null,
    delayMs: 0,
    priority: 0,
    retries: 3,
    scope: null,
    exclusive: false,
    key: null,
    tenantId: null,
    queue: 'default',
    retryPolicy: null,
    schedule: null,
    occurrence: null,
    shard: null,
    ...overrides,
  };
}

const engines: JobEngine[] = [];

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.stop({ timeoutMs: 1000 })));
});

/** A `JobEngine` that is stopped after the current test. */
export function engine(options: ConstructorParameters<typeof JobEngine>[0]): JobEngine {
  const e = new JobEngine(options);
  engines.push(e);
  return e;
}

/** Checks `check` every 5 ms until it is true; fails after `timeoutMs`. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
