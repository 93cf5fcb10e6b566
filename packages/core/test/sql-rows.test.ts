import { describe, expect, it } from 'vitest';
import {
  JOB_COLUMN_NAMES,
  jobRowAt,
  jobRowLayout,
  LEASED_COLUMN_NAMES,
  rowToJob,
} from '../src/sql/index.js';

describe('jobRowAt (array rows of the jobs columns)', () => {
  it('names every column of JOB_COLUMN_NAMES by its position, from the given offset', () => {
    const values = ['before', ...JOB_COLUMN_NAMES.map((name) => `value of ${name}`), 'after'];
    const row = jobRowAt(values, 1);
    expect(Object.keys(row)).toEqual([...JOB_COLUMN_NAMES]);
    for (const name of JOB_COLUMN_NAMES) expect(row[name]).toBe(`value of ${name}`);
  });

  it('reads as the same job as the named row it stands for', () => {
    const named = {
      id: '42',
      type: 'email',
      payload: '{"to":"a@b.c"}',
      state: 'running',
      priority: 3,
      due_at: 1_700_000_000_000,
      retries_left: 2,
      attempts: 1,
      scope: 'tenant-1',
      exclusive: true,
      job_key: 'k',
      tenant_id: 't',
      queue: 'default',
      created_at: 1_700_000_000_000,
      retry_policy: null,
      schedule_name: null,
      occurrence: null,
      shard_index: null,
      shard_count: null,
      meta: '{"trace":"x"}',
      scope_limit: 3,
      last_error_message: 'boom',
      last_error_stack: null,
      lock_owner: 'node-1',
      lock_expires_at: 1_700_000_030_000,
      lock_token: 'token',
      suspended_from: null,
      progress: '{"done":1}',
      cancel_requested: false,
      started_at: 1_700_000_000_500,
      timeout_ms: 60_000,
      logs: '[{"at":1700000000600,"message":"step 1"}]',
      steps: '[{"name":"charge","result":{"id":7},"at":1700000000700,"durationMs":3}]',
    };
    const values = JOB_COLUMN_NAMES.map((name) => named[name]);
    expect(rowToJob(jobRowAt(values))).toEqual(rowToJob(named));

    // A lease returns the other columns; its owner, token and state come from the lease.
    const leasedValues = ['flag', ...LEASED_COLUMN_NAMES.map((name) => named[name])];
    expect(LEASED_COLUMN_NAMES).not.toContain('lock_token');
    const lease = { owner: 'node-1', token: 'token' };
    const leased = jobRowAt(leasedValues, 1, jobRowLayout(LEASED_COLUMN_NAMES), lease);
    expect(rowToJob(leased)).toEqual(rowToJob(named));
  });
});
