import { MemoryJobStore } from '@jobs/core';
import { runExternalWorkerChecks } from './external-worker-checks.js';

runExternalWorkerChecks('memory', async () => ({
  store: new MemoryJobStore(),
  drop: async () => {},
}));
