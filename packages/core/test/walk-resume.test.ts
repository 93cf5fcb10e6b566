/**
 * When PostgreSQL's acquisition walk resumes after the last job it leased
 * (`sql/dialects/postgres.ts`), on an injected clock: what the SQL store sends is checked on a
 * real server in `packages/postgres/test/walk-resume.test.ts`.
 */
import { describe, expect, it } from 'vitest';
import type { AcquireRequest } from '../src/index.js';
import { type ResumedNotice, WalkResume } from '../src/sql/index.js';

const KEY = 'engine-1';
/** Leased rows as the dialect reads them: priority, and due time in epoch ms. */
const rows = (n: number, priority = 0, firstDue = 1_000): { priority: number; due_at: number }[] =>
  Array.from({ length: n }, (_, i) => ({ priority, due_at: firstDue + i }));

function walks(onResumed: ResumedNotice | null = null): {
  resume: WalkResume;
  advance: (ms: number) => void;
} {
  let now = 0;
  return {
    resume: new WalkResume(() => now, onResumed),
    advance: (ms) => {
      now += ms;
    },
  };
}

describe('WalkResume', () => {
  it('a quick walk from the head is never resumed, whatever the batch', () => {
    const { resume } = walks();
    resume.walkedHead(KEY, 5, rows(500), 500);
    expect(resume.from(KEY)).toBeNull();
  });

  it('a walk of 25 ms or more that cost under 150 µs a job (a big batch on a busy machine) is not resumed', () => {
    const { resume } = walks();
    resume.walkedHead(KEY, 70, rows(500), 500);
    expect(resume.from(KEY)).toBeNull();
    resume.walkedHead(KEY, 75, rows(500), 500);
    expect(resume.from(KEY)).not.toBeNull();
  });

  it('a slow full batch of 100 or more resumes after its last job: lowest priority, latest due time', () => {
    const { resume } = walks();
    resume.walkedHead(KEY, 120, [...rows(300, 5, 9_000), ...rows(200, 0, 1_000)], 500);
    expect(resume.from(KEY)).toEqual({ priority: 0, dueMs: 1_199 });
  });

  it('a slow walk that fills a small batch, or comes up short, does not start resuming', () => {
    const { resume } = walks();
    resume.walkedHead(KEY, 120, rows(50), 50);
    expect(resume.from(KEY)).toBeNull();
    resume.walkedHead(KEY, 120, rows(400), 500);
    expect(resume.from(KEY)).toBeNull();
  });

  it('the head is walked again after ten times its duration, within 0.1 s and 5 s', () => {
    const { resume, advance } = walks();
    resume.walkedHead(KEY, 40, rows(200), 200);
    advance(399);
    expect(resume.from(KEY)).not.toBeNull();
    advance(1);
    expect(resume.from(KEY)).toBeNull();

    resume.walkedHead(KEY, 2_000, rows(500), 500);
    advance(4_999);
    expect(resume.from(KEY)).not.toBeNull();
    advance(1);
    expect(resume.from(KEY)).toBeNull();
  });

  it('a resumed walk moves the point on while it costs at most half as much per job', () => {
    const { resume } = walks();
    resume.walkedHead(KEY, 100, rows(500), 500); // 0.2 ms a job
    resume.walkedOn(KEY, 50, rows(500, 0, 5_000)); // 0.1 ms a job: pays
    expect(resume.from(KEY)).toEqual({ priority: 0, dueMs: 5_499 });
    resume.walkedOn(KEY, 0, []); // nothing due after the point: it stays
    expect(resume.from(KEY)).toEqual({ priority: 0, dueMs: 5_499 });
    resume.walkedOn(KEY, 60, rows(500, 0, 7_000)); // 0.12 ms a job: a machine slow for everyone
    expect(resume.from(KEY)).toBeNull();
  });

  it('a slow walk from the head that came up short keeps a resumed walk going, past what it leased', () => {
    const { resume } = walks();
    resume.walkedHead(KEY, 100, rows(500), 500);
    resume.walkedHead(KEY, 100, [], 200);
    expect(resume.from(KEY)).toEqual({ priority: 0, dueMs: 1_499 });
    resume.walkedHead(KEY, 100, rows(20, 0, 3_000), 200);
    expect(resume.from(KEY)).toEqual({ priority: 0, dueMs: 3_019 });
    resume.walkedHead(KEY, 10, rows(20, 0, 4_000), 200); // quick again: from the head
    expect(resume.from(KEY)).toBeNull();
  });

  it('tells the store when a resumed walk paid, at most every 10 minutes', () => {
    const notices: unknown[] = [];
    const { resume, advance } = walks((head, resumed) => notices.push({ head, resumed }));
    resume.walkedHead(KEY, 100, rows(500), 500);
    resume.walkedOn(KEY, 80, rows(500)); // does not pay: nothing said
    expect(notices).toEqual([]);
    resume.walkedHead(KEY, 100, rows(500), 500);
    resume.walkedOn(KEY, 10, rows(400));
    expect(notices).toEqual([{ head: { ms: 100, jobs: 500 }, resumed: { ms: 10, jobs: 400 } }]);
    resume.walkedOn(KEY, 10, rows(400));
    advance(599_999);
    resume.walkedHead(KEY, 100, rows(500), 500);
    resume.walkedOn(KEY, 10, rows(400));
    expect(notices).toHaveLength(1);
    advance(1);
    resume.walkedOn(KEY, 10, rows(400));
    expect(notices).toHaveLength(2);
  });

  it('walks of different engines and filters are apart', () => {
    const { resume } = walks();
    const request = (owner: string, types: string[]): AcquireRequest => ({
      owner,
      limit: 500,
      leaseMs: 30_000,
      types,
      queues: null,
      tenants: null,
    });
    const a = WalkResume.keyOf(request('a', ['x']));
    resume.walkedHead(a, 100, rows(500), 500);
    expect(resume.from(a)).not.toBeNull();
    expect(resume.from(WalkResume.keyOf(request('b', ['x'])))).toBeNull();
    expect(resume.from(WalkResume.keyOf(request('a', ['x', 'y'])))).toBeNull();
  });
});
