import { describe, it } from 'vitest';
import { mysqlStore } from './backends.js';
import { runExternalWorkerChecks } from './external-worker-checks.js';

const factory = await mysqlStore();
if (factory) runExternalWorkerChecks('mysql', factory);
else describe.skip('external workers over HTTP (mysql): server unreachable', () => it('skipped'));
