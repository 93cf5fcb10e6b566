/**
 * Wake-ups that cost O(1) per job, not O(nodes): an enqueue NOTIFYs a few idle nodes, not all.
 *
 * Each store that listens also LISTENs on a channel of its own, `jobs_<hash>_<id>`, and names its
 * listening connection `jobs:idle:<hash>:<id>` while its engines have room (the last acquisition
 * came back short) or `jobs:busy:<hash>:<id>` while they are full (`application_name`, set once
 * per change on that connection). A wake-up reads `pg_stat_activity` — no table, nothing to
 * clean up: a node that dies leaves with its session — and notifies at most `k` idle nodes, in
 * random order, or the store's shared channel when none is idle (every node still LISTENs
 * there: a busy node that frees up, the SQL `enqueue` function, `wakeUps: 'broadcast'` stores).
 *
 * Enqueues outside a caller's transaction send no NOTIFY in their own transaction: the commit of
 * a transaction that NOTIFYs takes PostgreSQL's server-wide notify lock, so concurrent enqueuers
 * would queue on it. They are woken after commit by `CoalescedWakes`: one statement at a time
 * per store, covering every enqueue that committed while the previous one was under way.
 */
import { randomBytes } from 'node:crypto';
import type { Query } from '@jobs/core/sql';

/** Idle nodes one wake-up notifies at most. */
export const MAX_WAKE_TARGETS = 8;
/** Idle nodes a wake-up sent inside a transaction notifies (it does not know how many jobs). */
export const IN_TRANSACTION_WAKE_TARGETS = 2;

/** FNV-1a of `text`, 8 hex digits: the store's channel, short enough for a channel name. */
function hash8(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** The names one listening store goes by. */
export class WakeTargets {
  /** The node's own channel. */
  readonly ownChannel: string;
  private readonly hash: string;
  private readonly id = randomBytes(6).toString('hex');

  constructor(
    /** The store's shared channel. */
    readonly sharedChannel: string,
  ) {
    this.hash = hash8(sharedChannel);
    this.ownChannel = `jobs_${this.hash}_${this.id}`;
  }

  /** The listening connection's `application_name` while idle (a wake-up target) or busy. */
  applicationName(idle: boolean): string {
    return `jobs:${idle ? 'idle' : 'busy'}:${this.hash}:${this.id}`;
  }

  /**
   * A SELECT that notifies at most `k` idle nodes of this channel (random ones), or the shared
   * channel when none is idle; one row per notification. `others`: not this node (after an
   * enqueue through this store: an engine here that can run the job woke itself).
   */
  notifyQuery(k: number, others = false): Query {
    return {
      sql: `WITH idle AS (SELECT split_part(application_name, ':', 4) AS id FROM pg_stat_activity
  WHERE application_name LIKE ? AND application_name <> ? ORDER BY random() LIMIT ?)
SELECT pg_notify(? || idle.id, '') FROM idle
UNION ALL SELECT pg_notify(?, '') WHERE NOT EXISTS (SELECT 1 FROM idle)`,
      params: [
        `jobs:idle:${this.hash}:%`,
        others ? this.applicationName(true) : '',
        k,
        `jobs_${this.hash}_`,
        this.sharedChannel,
      ],
    };
  }
}

/** How many nodes a wake-up for `jobs` new jobs notifies. */
export function wakeTargetsFor(jobs: number): number {
  return Math.max(1, Math.min(jobs, MAX_WAKE_TARGETS));
}

/**
 * Wake-ups sent after commit, coalesced: at most one statement in flight per store; enqueues
 * that commit meanwhile are covered by one more, sized for all of them.
 */
export class CoalescedWakes {
  private pending = 0;
  private flushing: Promise<void> | null = null;

  constructor(private readonly send: (jobs: number) => Promise<unknown>) {}

  /** `jobs` were committed: wake nodes for them soon (now, or after the wake-up in flight). */
  request(jobs: number): void {
    if (jobs <= 0) return;
    this.pending += jobs;
    this.flushing ??= this.flush();
  }

  /** Resolves once no wake-up is pending or in flight. */
  async drained(): Promise<void> {
    await this.flushing;
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending > 0) {
        const jobs = this.pending;
        this.pending = 0;
        // A lost wake-up costs latency, never a job: engines also poll.
        await this.send(jobs).catch(() => undefined);
      }
    } finally {
      this.flushing = null;
    }
  }
}
