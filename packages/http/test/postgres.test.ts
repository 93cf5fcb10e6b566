import { describe, it } from 'vitest';
import { postgresStore } from './backends.js';
import { runExternalWorkerChecks } from './external-worker-checks.js';

const factory = await postgresStore();
if (factory) runExternalWorkerChecks('postgres', factory);
else
  describe.skip('external workers over HTTP (postgres): server unreachable', () => it('skipped'));
