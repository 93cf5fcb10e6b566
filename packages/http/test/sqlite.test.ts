import { sqliteStore } from './backends.js';
import { runExternalWorkerChecks } from './external-worker-checks.js';

runExternalWorkerChecks('sqlite', sqliteStore().factory);
