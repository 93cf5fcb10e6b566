/**
 * The suite on a store that answers every call 15 ms late (half on the way in, half on
 * the way out, like a network round trip), with the suite's default time limits and vitest's
 * default testTimeout/hookTimeout (see vitest.config.ts): a correct store on a slow link must
 * pass without raising either. Groups with nothing that waits run in memory.test.ts only.
 */
import { type JobStore, MemoryJobStore } from '@jobs/core';
import { type GroupName, runJobStoreConformance } from '../src/index.js';

const LATENCY_MS = 15;

/**
 * Groups of single store calls answered in order, with no engine, lease, race or wait in them:
 * latency only makes them slower, never different; memory.test.ts runs them. The groups left
 * here are those where a slow link meets the suite's time limits and an engine's timing.
 */
const NO_WAITING =
  'no engine, lease or wait in it: latency changes nothing (memory.test.ts runs it)';
const SAME_WITHOUT_LATENCY: GroupName[] = [
  'enqueue',
  'acquire',
  'failure',
  'deadletter',
  'suspension',
  'exclusive',
  'key-modes',
  'rate-limit',
  'release',
  'admin',
  'operator-views',
  'hostile-input',
  'history',
  'logs',
  'schedules',
];

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `inner` with every method call delayed by `latencyMs`: half before the call reaches the store,
 * half before its answer (or error) comes back. `subscribe` (synchronous) and plain properties
 * pass through.
 */
function withLatency<S extends JobStore>(inner: S, latencyMs: number): S {
  const request = Math.floor(latencyMs / 2);
  const response = latencyMs - request;
  return new Proxy(inner, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (property === 'subscribe') return value.bind(target);
      return async (...args: unknown[]) => {
        await sleep(request);
        try {
          return await value.apply(target, args);
        } finally {
          await sleep(response);
        }
      };
    },
  });
}

runJobStoreConformance({
  name: `memory, ${LATENCY_MS} ms latency per call`,
  createStore: async () => withLatency(new MemoryJobStore(), LATENCY_MS),
  // One instance, as in memory.test.ts: racing calls interleave at every await.
  connectPeer: async (store) => store,
  skip: {
    durability: 'the memory store keeps nothing beyond its instance, by design',
    ...Object.fromEntries(SAME_WITHOUT_LATENCY.map((group) => [group, NO_WAITING])),
  },
});
