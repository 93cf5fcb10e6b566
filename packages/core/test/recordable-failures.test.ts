import { describe, expect, it } from 'vitest';
import { FakeClock } from '../src/clock.js';
import {
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ERROR_STACK_LENGTH,
  StoreError,
  toJobError,
} from '../src/errors.js';
import { MemoryJobStore } from '../src/memory-store.js';
import { ScheduleRunner } from '../src/schedule/index.js';
import type { JobFailure, ScheduleFire, SettleResult } from '../src/store.js';
import { engine, waitFor } from './helpers.js';

describe('errors a handler throws are always recordable', () => {
  it('NUL and other control characters are removed, newlines and tabs kept', () => {
    const error = new Error('bad\u0000byte\u0007 here\n\tnext line');
    expect(toJobError(error).message).toBe('badbyte here\n\tnext line');
  });

  it('messages and stacks are capped, saying how much was cut, never splitting a character', () => {
    const huge = `${'😀'.repeat(40_000)}`;
    const error = new Error(huge);
    error.stack = `Error: x\n${'    at frame (file.ts:1:1)\n'.repeat(5_000)}`;
    const recorded = toJobError(error);
    expect(recorded.message.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_LENGTH);
    expect(recorded.message).toMatch(/more characters cut\]$/);
    expect(recorded.message).not.toMatch(/[\ud800-\udbff]$/);
    expect(recorded.stack?.length).toBeLessThanOrEqual(MAX_ERROR_STACK_LENGTH);
    expect(recorded.stack).toMatch(/^Error: x\n/);
  });

  it('lone surrogates become U+FFFD; a non-Error value is recorded as JSON', () => {
    expect(toJobError(new Error('half \ud83d pair')).message).toBe('half \ufffd pair');
    expect(toJobError({ code: 7 })).toEqual({ message: '{"code":7}', stack: null });
  });
});

/** A memory store whose `fail` refuses any batch holding a message with `poison` in it. */
class PickyStore extends MemoryJobStore {
  refusedBatches = 0;
  override async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    if (failures.some((f) => f.error.message.includes('poison'))) {
      this.refusedBatches += 1;
      throw new StoreError('value too long for column');
    }
    return super.fail(failures);
  }
}

describe('one job whose failure cannot be written never holds back the others', () => {
  it('a refused batch of failures is split, and every other failure lands', async () => {
    const store = new PickyStore();
    const e = engine({
      store,
      concurrency: 10,
      leaseMs: 2_000,
      retries: 0,
      handlers: {
        boom: async (job) => {
          throw new Error((job.payload as { poison: boolean }).poison ? 'poison' : 'plain');
        },
      },
    });
    await e.start();
    const jobs = await e.enqueueMany(
      Array.from({ length: 10 }, (_, i) => ({ type: 'boom', payload: { poison: i === 3 } })),
    );
    const poisoned = jobs[3]?.id as string;
    await waitFor(async () => {
      const dead = await store.listJobs({ state: 'deadletter', limit: 100, offset: 0 });
      return dead.length === 9;
    }, 'nine jobs in the dead-letter area');
    expect(store.refusedBatches).toBeGreaterThan(0);
    const dead = await store.listJobs({ state: 'deadletter', limit: 100, offset: 0 });
    expect(dead.map((j) => j.id)).not.toContain(poisoned);
    expect(dead.every((j) => j.lastError?.message === 'plain')).toBe(true);
  });
});

/** A memory store that refuses to fire one schedule, as a column too short for its type would. */
class OneBadScheduleStore extends MemoryJobStore {
  refused = 0;
  override async fireSchedule(fire: ScheduleFire) {
    if (fire.name === 'bad') {
      this.refused += 1;
      throw new StoreError("Data too long for column 'type'");
    }
    return super.fireSchedule(fire);
  }
}

describe('one schedule that cannot fire never stops another', () => {
  it('the failing schedule is reported and retried with backoff; the others fire', async () => {
    const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
    const store = new OneBadScheduleStore({ clock });
    const errors: string[] = [];
    const runner = new ScheduleRunner({
      store,
      clock,
      emit: (event, payload) => {
        if (event === 'error') errors.push((payload as { during: string }).during);
      },
    });
    await runner.define('bad', { every: 'PT1M' });
    await runner.define('good', { every: 'PT1M' });
    clock.advance(60_000);
    const wake = await runner.fireDue();
    expect(errors).toEqual(['schedule bad']);
    const jobs = await store.listJobs({ limit: 100, offset: 0 });
    expect(jobs.map((j) => j.schedule)).toEqual(['good']);
    // The failing schedule is not retried at once (no spinning), but after its backoff.
    expect(wake).not.toBeNull();
    expect((wake as Date).getTime()).toBeGreaterThan(clock.now());
    await runner.fireDue();
    expect(store.refused).toBe(1);
    clock.advance(1_000);
    await runner.fireDue();
    expect(store.refused).toBe(2);
  });
});
