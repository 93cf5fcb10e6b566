/**
 * Resuming PostgreSQL's acquisition walk after the last job it leased, while walking from the
 * head is slow (issue: long transactions beside the queue; `pnpm bench long-tx`).
 *
 * Every acquisition walks `jobs_acquire` from its head. A job leased or finished leaves its old
 * row version's entry there until vacuum removes it, and while a transaction holds the server's
 * xmin horizon (an idle `BEGIN` in a console, a REPEATABLE READ reader) nothing can be removed:
 * each walk visits every row version dead since, so its cost grows with the jobs run since the
 * horizon was taken, and throughput falls with it.
 *
 * So when a walk from the head was slow (`walkResumeTuning`: 25 ms, and 150 µs a job) for a full
 * batch of at least `minResumeBatch` jobs, the next walks start where it ended: higher priorities from the
 * head of theirs, then the priority of the last job it leased from that job's due time on — an
 * index condition, so the dead entries before it are not visited — then lower priorities.
 * The head is walked again after ten times its own last duration (within 0.1–5 s), and
 * resuming stops as soon as it does not pay: a resumed walk that is not at least twice as fast
 * per job as the last walk from the head (a machine slow for every statement, not a walk over
 * dead entries).
 *
 * What it can cost: a job that became acquirable behind the resume point — of the same
 * priority and due before it (enqueued by a transaction that committed late, given back) — waits
 * for the next walk from the head: at most `headEveryMaxMs` (5 s). It never takes a job the walk
 * from the head would not: same filters, same locks, same lease; it only starts later in the
 * acquisition order. A quick walk from the head is never resumed.
 */
import { monotonicNow } from '../../clock.js';
import type { AcquireRequest } from '../../store.js';
import type { SqlRow } from '../rows.js';

/**
 * When walks resume. Tests lower `slowHeadMs`, `slowHeadMsPerJob` and `minResumeBatch` and raise
 * `resumedCostAtMost` to make every walk resume, which a quick machine with few dead row
 * versions never does.
 */
export const walkResumeTuning = {
  /**
   * A walk from the head slower than this (ms), and than `slowHeadMsPerJob` a job leased, for a
   * full batch is resumed next time.
   */
  slowHeadMs: 25,
  /**
   * A statement that walks from the head and leases costs 15–90 µs a job on a busy 2-core
   * machine; one that also visits the dead entries of the jobs run since a held horizon costs
   * 150 µs a job after a minute of it, 600 µs after five.
   */
  slowHeadMsPerJob: 0.15,
  /** The smallest full batch whose walk is resumed (a few jobs are never worth reordering). */
  minResumeBatch: 100,
  /** The head is walked again after this many times its last duration… */
  headEveryFactor: 10,
  /** …but never sooner than this (ms)… */
  headEveryMinMs: 100,
  /** …nor later: the longest a job behind the resume point waits for a walk from the head. */
  headEveryMaxMs: 5_000,
  /** A resumed walk goes on while it costs at most this share per job of the walk from the head. */
  resumedCostAtMost: 0.5,
};
/** The least time between two `onResumed` calls of one store. */
export const RESUMED_NOTICE_EVERY_MS = 10 * 60_000;
/** Walks remembered per store: one per engine and filter. */
const MAX_WALKS = 64;

/** Where a resumed walk starts: the priority of the last job leased, and its due time. */
export interface ResumePoint {
  priority: number;
  dueMs: number;
}

interface Walk {
  /** When the last walk from the head ran (`now()`), how long it took, and the jobs it leased. */
  headAt: number;
  headMs: number;
  headJobs: number;
  from: ResumePoint | null;
}

/**
 * What a store hears when a resumed walk has paid (at most every `RESUMED_NOTICE_EVERY_MS`): the
 * last walk from the head, its ms and jobs, and the resumed one's.
 */
export type ResumedNotice = (
  head: { ms: number; jobs: number },
  resumed: { ms: number; jobs: number },
) => void;

/** The walks of one store (see the file comment). `now` is injectable for tests. */
export class WalkResume {
  private readonly walks = new Map<string, Walk>();
  private noticedAt: number | null = null;

  constructor(
    private readonly now: () => number = monotonicNow,
    private readonly onResumed: ResumedNotice | null = null,
  ) {}

  /** The walk an acquisition request belongs to: its engine and its filters. */
  static keyOf(request: AcquireRequest): string {
    return JSON.stringify([request.owner, request.types, request.queues, request.tenants]);
  }

  /** Where the next walk of `key` starts; null: from the head. */
  from(key: string): ResumePoint | null {
    const walk = this.walks.get(key);
    if (!walk?.from) return null;
    const { headEveryFactor, headEveryMinMs, headEveryMaxMs } = walkResumeTuning;
    const every = Math.min(headEveryMaxMs, Math.max(headEveryMinMs, walk.headMs * headEveryFactor));
    return this.now() - walk.headAt < every ? walk.from : null;
  }

  /**
   * A walk from the head took `ms` and leased `leased` of the `limit` asked for. A slow one is
   * resumed after its last job when it filled a batch of at least `minResumeBatch`; a slow one
   * that came up short (it found every due job) keeps resuming walks already resumed, from its
   * own last job if it leased any.
   */
  walkedHead(key: string, ms: number, leased: readonly SqlRow[], limit: number): void {
    const before = this.walks.get(key);
    if (!before && this.walks.size >= MAX_WALKS) this.walks.clear();
    let from: ResumePoint | null = null;
    const { slowHeadMs, slowHeadMsPerJob } = walkResumeTuning;
    if (ms >= slowHeadMs && ms >= slowHeadMsPerJob * Math.max(1, leased.length)) {
      if (leased.length === limit && limit >= walkResumeTuning.minResumeBatch) {
        from = lastLeased(leased);
      } else if (before?.from) {
        from = lastLeased(leased) ?? before.from;
      }
    }
    this.walks.set(key, {
      headAt: this.now(),
      headMs: ms,
      headJobs: leased.length,
      from,
    });
  }

  /**
   * A resumed walk took `ms` and leased `leased`: it goes on from its last job while it costs
   * at most half as much per job as the last walk from the head. One that leased nothing
   * (nothing due after the point) leaves the point where it is.
   */
  walkedOn(key: string, ms: number, leased: readonly SqlRow[]): void {
    const walk = this.walks.get(key);
    if (!walk || leased.length === 0) return;
    const headMsPerJob = walk.headMs / Math.max(1, walk.headJobs);
    const pays = ms / leased.length <= headMsPerJob * walkResumeTuning.resumedCostAtMost;
    walk.from = pays ? lastLeased(leased) : null;
    const now = this.now();
    if (
      pays &&
      this.onResumed &&
      (this.noticedAt === null || now - this.noticedAt >= RESUMED_NOTICE_EVERY_MS)
    ) {
      this.noticedAt = now;
      this.onResumed({ ms: walk.headMs, jobs: walk.headJobs }, { ms, jobs: leased.length });
    }
  }
}

/**
 * The last of `leased` in acquisition order (priority descending, then due time): the lowest
 * priority, and of those the latest due time.
 */
function lastLeased(leased: readonly SqlRow[]): ResumePoint | null {
  let last: ResumePoint | null = null;
  for (const row of leased) {
    const priority = Number(row.priority);
    const dueMs = Number(row.due_at);
    if (!Number.isFinite(priority) || !Number.isFinite(dueMs)) return null;
    if (!last || priority < last.priority || (priority === last.priority && dueMs > last.dueMs)) {
      last = { priority, dueMs };
    }
  }
  return last;
}
