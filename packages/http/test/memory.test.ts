import { MemoryJobStore } from '@jobs/core';
import { runExternalWorkerChecks } from './external-worker-checks.js';

runExternalWorkerChecks('memory', async () => ({
  store: new MemoryJobStore(),
  drop: async () => {},
}));

// A store without the optional `completeAndAcquire`: an acquire's completions are written on
// their own (batched with other requests'), then it acquires.
runExternalWorkerChecks('memory, no completeAndAcquire', async () => {
  const store = new MemoryJobStore();
  Object.defineProperty(store, 'completeAndAcquire', { value: undefined });
  return { store, drop: async () => {} };
});
