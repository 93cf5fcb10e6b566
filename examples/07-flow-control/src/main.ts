/**
 * Flow control: how an app keeps long jobs in hand (see README.md). Each scenario is a file of
 * its own under `src/`, run here one after the other on the same SQLite file.
 *
 * JOBS_DB (default `flow-control.db` in the current folder) names the SQLite file.
 */
import { resolve } from 'node:path';
import { cancelLongJob } from './cancel-long-job.js';
import { perCustomerLimit } from './per-customer-limit.js';
import { rateLimitedApi } from './rate-limited-api.js';

const filename = resolve(process.env.JOBS_DB ?? 'flow-control.db');

await cancelLongJob(filename);
await perCustomerLimit(filename);
await rateLimitedApi(filename);
