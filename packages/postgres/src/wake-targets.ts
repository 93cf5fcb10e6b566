/**
 * Wake-ups that cost O(1) per job, not O(nodes): an enqueue NOTIFYs a few idle nodes that can
 * run its jobs, not all.
 *
 * Each store that listens also LISTENs on a channel of its own, `jobs_<hash>_<id>`, and names its
 * listening connection `jobs:idle:<hash>:<id>:<filter>` while its engines have room (the last
 * acquisition came back short) or `jobs:busy:<hash>:<id>` while they are full (`application_name`,
 * set once per change on that connection). `<filter>` is a 128-bit Bloom filter (3 hashes, 32 hex
 * digits) of what the idle engines acquire: `t:<type>` for each handler type, `q:*` (every queue)
 * or `q:<queue>` for each queue, `n:*` (every tenant) or `n:<tenant>` for each tenant. A wake-up
 * reads `pg_stat_activity` once — no table, nothing to clean up: a node that dies leaves with its
 * session — and, for each distinct (type, queue, tenant) of the jobs it is for, notifies at most
 * `k` random idle nodes whose filter may accept such a job; when some combination has no such
 * node, it notifies the store's shared channel instead (every node LISTENs there: a busy node that
 * frees up, the SQL `enqueue` function, `wakeUps: 'broadcast'` stores).
 *
 * A Bloom filter has false positives, never false negatives: a node woken for a job it cannot run
 * acquires nothing, and the job waits at most for the next poll (`pollIntervalMs`) of a node that
 * runs it — the bound a lost notification already has. The odds, per entry a job needs, are
 * about (1 − e^(−3n/128))³ for a node with `n` entries: 0.3 % with 7, 1.5 % with 12, 9 % with 25.
 *
 * Enqueues outside a caller's transaction send no NOTIFY in their own transaction: the commit of
 * a transaction that NOTIFYs takes PostgreSQL's server-wide notify lock, so concurrent enqueuers
 * would queue on it. They are woken after commit by `CoalescedWakes`: one statement at a time
 * per store, covering every enqueue that committed while the previous one was under way.
 * Enqueues inside the caller's transaction (and jobs given back or recovered) NOTIFY the shared
 * channel in that transaction: the statement does not know the jobs, so it wakes every node.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { AcquireRequest } from '@jobs/core';
import type { Query } from '@jobs/core/sql';

/** Idle nodes one wake-up notifies at most, per (type, queue, tenant) of its jobs. */
export const MAX_WAKE_TARGETS = 8;
/** Distinct (type, queue, tenant) one wake-up targets; past it, it wakes every node. */
export const MAX_WAKE_COMBINATIONS = 16;
/** Bits in a node's filter. */
const FILTER_BITS = 128;
/** Bits each entry sets. */
const FILTER_HASHES = 3;

/** FNV-1a of `text`, 8 hex digits: the store's channel, short enough for a channel name. */
function hash8(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** `entryBits` of recent entries (a node's own types, queues and tenants, mostly). */
const bitsCache = new Map<string, number[]>();

/** The filter bits of one entry (`t:<type>`, `q:*`…): the first bytes of its SHA-256. */
function entryBits(entry: string): number[] {
  let bits = bitsCache.get(entry);
  if (!bits) {
    const digest = createHash('sha256').update(entry).digest();
    bits = Array.from({ length: FILTER_HASHES }, (_, i) => (digest[i] as number) % FILTER_BITS);
    if (bitsCache.size >= 1_024) bitsCache.clear();
    bitsCache.set(entry, bits);
  }
  return bits;
}

/** A 128-bit set as 32 hex digits (`('x' || hex)::bit(128)` in SQL). */
function toHex(entries: Iterable<string>): string {
  const bytes = new Uint8Array(FILTER_BITS / 8);
  for (const entry of entries) {
    for (const bit of entryBits(entry))
      bytes[bit >> 3] = (bytes[bit >> 3] as number) | (1 << (bit & 7));
  }
  return Buffer.from(bytes).toString('hex');
}

/** What an acquisition request accepts, as filter entries. */
function requestEntries(request: Pick<AcquireRequest, 'types' | 'queues' | 'tenants'>): string[] {
  return [
    ...request.types.map((type) => `t:${type}`),
    ...(request.queues === null ? ['q:*'] : request.queues.map((queue) => `q:${queue}`)),
    ...(request.tenants === null ? ['n:*'] : request.tenants.map((tenant) => `n:${tenant}`)),
  ];
}

/** The Bloom filter (32 hex digits) of everything `requests` acquire. */
export function acquisitionFilter(
  requests: Iterable<Pick<AcquireRequest, 'types' | 'queues' | 'tenants'>>,
): string {
  const entries: string[] = [];
  for (const request of requests) entries.push(...requestEntries(request));
  return toHex(entries);
}

/** One (type, queue, tenant) of enqueued jobs, with how many jobs have it. */
export interface WakeCombination {
  type: string;
  queue: string;
  tenantId: string | null;
  jobs: number;
}

/**
 * The masks a node's filter must contain one of to accept a job of `c`: its type, and the queue
 * unrestricted or this queue, and the tenant unrestricted or this tenant (a job without tenant:
 * only unrestricted nodes take it).
 */
export function acceptMasks(c: Pick<WakeCombination, 'type' | 'queue' | 'tenantId'>): string[] {
  const queues = ['q:*', `q:${c.queue}`];
  const tenants = c.tenantId === null ? ['n:*'] : ['n:*', `n:${c.tenantId}`];
  const masks = new Set<string>();
  for (const q of queues) for (const n of tenants) masks.add(toHex([`t:${c.type}`, q, n]));
  return [...masks];
}

/** The names one listening store goes by. */
export class WakeTargets {
  /** The node's own channel. */
  readonly ownChannel: string;
  private readonly hash: string;
  /** 10 hex digits: the idle name, filter included, fits `application_name`'s 63 bytes. */
  private readonly id = randomBytes(5).toString('hex');

  constructor(
    /** The store's shared channel. */
    readonly sharedChannel: string,
  ) {
    this.hash = hash8(sharedChannel);
    this.ownChannel = `jobs_${this.hash}_${this.id}`;
  }

  /**
   * The listening connection's `application_name`: idle (a wake-up target for jobs its
   * `filter`, from `acquisitionFilter`, may accept) when `filter` is given, else busy.
   */
  applicationName(filter: string | null): string {
    return filter === null
      ? `jobs:busy:${this.hash}:${this.id}`
      : `jobs:idle:${this.hash}:${this.id}:${filter}`;
  }

  /**
   * A SELECT that, for each of `combinations`, notifies at most `min(jobs, 8)` random idle nodes
   * of this channel whose filter may accept such a job — or the shared channel alone when some
   * combination has no such node (an idle name without a filter accepts everything). One row per
   * notification. `others`: not this node (after an enqueue through this store: an engine here
   * that can run the job woke itself).
   */
  notifyQuery(combinations: readonly WakeCombination[], others = false): Query {
    const want = combinations.flatMap((c, i) =>
      acceptMasks(c).map((m) => ({ c: i, k: wakeTargetsFor(c.jobs), m })),
    );
    return {
      sql: `WITH nodes AS (
  SELECT split_part(application_name, ':', 4) AS id,
    CASE WHEN split_part(application_name, ':', 5) ~ '^[0-9a-f]{32}$'
      THEN ('x' || split_part(application_name, ':', 5))::bit(128)
      ELSE ('x' || repeat('f', 32))::bit(128) END AS f
  FROM pg_stat_activity WHERE application_name LIKE ? AND split_part(application_name, ':', 4) <> ?),
want AS (SELECT w.c, w.k, ('x' || w.m)::bit(128) AS m
  FROM jsonb_to_recordset(?::jsonb) AS w(c int, k int, m text)),
matches AS (SELECT DISTINCT want.c, want.k, nodes.id FROM want JOIN nodes ON (nodes.f & want.m) = want.m),
unmatched AS (SELECT DISTINCT c FROM want WHERE c NOT IN (SELECT c FROM matches)),
picked AS (SELECT DISTINCT id FROM (SELECT id, k, row_number() OVER (PARTITION BY c ORDER BY random()) AS r
  FROM matches) ranked WHERE r <= k)
SELECT pg_notify(? || picked.id, '') FROM picked WHERE NOT EXISTS (SELECT 1 FROM unmatched)
UNION ALL SELECT pg_notify(?, '') WHERE EXISTS (SELECT 1 FROM unmatched)`,
      params: [
        `jobs:idle:${this.hash}:%`,
        others ? this.id : '',
        JSON.stringify(want),
        `jobs_${this.hash}_`,
        this.sharedChannel,
      ],
    };
  }
}

/** How many nodes a wake-up for `jobs` new jobs of one combination notifies. */
export function wakeTargetsFor(jobs: number): number {
  return Math.max(1, Math.min(jobs, MAX_WAKE_TARGETS));
}

/**
 * The jobs one wake-up is for: their distinct (type, queue, tenant), or null past
 * `MAX_WAKE_COMBINATIONS` of them (wake every node).
 */
export type WakeRequest = WakeCombination[] | null;

/**
 * Wake-ups sent after commit, coalesced: at most one statement in flight per store; enqueues
 * that commit meanwhile are covered by one more, for all of their jobs' combinations.
 */
export class CoalescedWakes {
  private pending = new Map<string, WakeCombination>();
  /** More combinations are pending than one wake-up targets. */
  private overflow = false;
  private flushing: Promise<void> | null = null;

  constructor(private readonly send: (request: WakeRequest) => Promise<unknown>) {}

  /** Jobs of `combinations` were committed: wake nodes for them soon. */
  request(jobs: readonly Pick<WakeCombination, 'type' | 'queue' | 'tenantId'>[]): void {
    if (jobs.length === 0) return;
    // A batch mostly repeats one combination: the previous job's is counted without a key.
    let last: WakeCombination | undefined;
    for (const job of jobs) {
      if (this.overflow) break;
      if (
        last !== undefined &&
        last.type === job.type &&
        last.queue === job.queue &&
        last.tenantId === job.tenantId
      ) {
        last.jobs++;
        continue;
      }
      const key = JSON.stringify([job.type, job.queue, job.tenantId]);
      last = this.pending.get(key);
      if (last) last.jobs++;
      else if (this.pending.size >= MAX_WAKE_COMBINATIONS) this.overflow = true;
      else {
        last = { type: job.type, queue: job.queue, tenantId: job.tenantId, jobs: 1 };
        this.pending.set(key, last);
      }
    }
    this.flushing ??= this.flush();
  }

  /** Resolves once no wake-up is pending or in flight. */
  async drained(): Promise<void> {
    await this.flushing;
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.size > 0 || this.overflow) {
        const request = this.overflow ? null : [...this.pending.values()];
        this.pending = new Map();
        this.overflow = false;
        // A lost wake-up costs latency, never a job: engines also poll.
        await this.send(request).catch(() => undefined);
      }
    } finally {
      this.flushing = null;
    }
  }
}
