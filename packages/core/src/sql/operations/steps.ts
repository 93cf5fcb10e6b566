/**
 * Durable steps' checkpoints (`JobStore.saveSteps`): one fenced UPDATE that writes a job's
 * step list only while the lease that wrote it is current — the token matches and the job is
 * running. A stale owner's checkpoint changes no row and is never recorded.
 */
import type { JobRef } from '../../store.js';
import { isJobId } from '../dialect.js';
import type { Operation } from '../executor.js';
import type { SqlEnv } from './env.js';

export function* saveSteps(c: SqlEnv, ref: JobRef, stepsJson: string): Operation<boolean> {
  if (!isJobId(ref.id)) return false;
  const { affected } = yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET "steps" = ? WHERE "id" = ? AND "lock_token" = ? AND "state" = 'running'`,
    ),
    params: [stepsJson, ref.id, ref.token],
  };
  return affected > 0;
}
