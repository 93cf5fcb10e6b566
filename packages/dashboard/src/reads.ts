/**
 * The reads the pages share, all through the admin API of `@jobs/core` (`JobAdmin`), on any
 * store: its answers say when a store lacks an optional read (keyset paging, capped counts,
 * queue stats, history), and the page then says so instead of guessing.
 */
import {
  historyCursor,
  type Job,
  type JobAdmin,
  type JobFilter,
  type JobHistoryRecord,
  ValidationError,
} from '@jobs/core';

/** Rows per page of the jobs and history lists. */
export const PAGE_SIZE = 50;
/** Counts stop here: a page header reads "10,000+" instead of counting a million rows. */
export const COUNT_CAP = 10_001;
/** Live jobs the overview groups exactly by default (`countLimit`); beyond, the newest this many. */
export const DEFAULT_COUNT_LIMIT = 20_000;
/** Dead-letter jobs read to group them by type and error. */
export const GROUP_SCAN_CAP = 5_000;
/** Jobs a bulk action selected by error message touches at most per request. */
export const BULK_SCAN_CAP = 10_000;
/**
 * The live job `id`, else its history record, else null. An id no job can have (a blank one
 * included) names nothing, and is no error.
 */
export async function findJob(admin: JobAdmin, id: string): Promise<Job | JobHistoryRecord | null> {
  try {
    return await admin.getJob(id);
  } catch (error) {
    if (error instanceof ValidationError) return null;
    throw error;
  }
}

/** The live job `id`, or null (none, or it finished: only its history record is left). */
export async function liveJob(admin: JobAdmin, id: string): Promise<Job | null> {
  const found = await findJob(admin, id);
  return found && found.state !== 'finished' ? found : null;
}

/** True when id `a` comes after `b` in id order (numeric ids compare as numbers). */
export function idAfter(a: string, b: string): boolean {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a > b;
}

export interface JobsPage {
  jobs: Job[];
  hasMore: boolean;
  /** False when the store ignored `afterId` and the page was read by offset. */
  keyset: boolean;
}

/**
 * One page of jobs after `afterId` (keyset), falling back to `offset` when the store ignores
 * `afterId`. A `key` filter is also checked here, for stores that ignore it.
 */
export async function readJobsPage(
  admin: JobAdmin,
  filter: JobFilter,
  position: { afterId: string | null; offset: number },
  limit = PAGE_SIZE,
): Promise<JobsPage> {
  let keyset = true;
  let jobs: Job[];
  if (position.afterId === null) {
    jobs = await admin.listJobs({ ...filter, limit: limit + 1, offset: 0 });
  } else {
    jobs = await admin.listJobs({
      ...filter,
      afterId: position.afterId,
      limit: limit + 1,
      offset: 0,
    });
    const first = jobs[0];
    if (first && !idAfter(first.id, position.afterId)) {
      keyset = false;
      jobs = await admin.listJobs({ ...filter, limit: limit + 1, offset: position.offset });
    }
  }
  if (filter.key !== undefined) jobs = jobs.filter((job) => job.key === filter.key);
  return { jobs: jobs.slice(0, limit), hasMore: jobs.length > limit, keyset };
}

/**
 * Every job matching `filter` (and `accept`), read page by page in id order, at most `cap`.
 * `truncated` says the cap was hit.
 */
export async function scanJobs(
  admin: JobAdmin,
  filter: JobFilter,
  cap: number,
  accept: (job: Job) => boolean = () => true,
): Promise<{ jobs: Job[]; truncated: boolean }> {
  const out: Job[] = [];
  let afterId: string | null = null;
  let offset = 0;
  for (;;) {
    // 999 + the one `readJobsPage` reads ahead: the contract's largest page, 1,000.
    const page = await readJobsPage(admin, filter, { afterId, offset }, 999);
    for (const job of page.jobs) {
      if (!accept(job)) continue;
      if (out.length >= cap) return { jobs: out, truncated: true };
      out.push(job);
    }
    const last = page.jobs[page.jobs.length - 1];
    if (!page.hasMore || !last) return { jobs: out, truncated: false };
    afterId = last.id;
    offset += page.jobs.length;
  }
}

/** How many jobs match, counting at most `COUNT_CAP`; null when the store cannot count. */
export async function cappedCount(admin: JobAdmin, filter: JobFilter): Promise<number | null> {
  // A store's count may ignore `key`: no count rather than a wrong one.
  if (filter.key !== undefined) return null;
  const n = await admin.countJobs(filter, COUNT_CAP);
  return n === null ? null : Math.min(n, COUNT_CAP);
}

/** History records finished since `since`, newest first, at most `cap`; null without history. */
export async function recentHistory(
  admin: JobAdmin,
  since: Date,
  cap: number,
): Promise<{ records: JobHistoryRecord[]; truncated: boolean } | null> {
  if (!admin.keepsHistory) return null;
  const records: JobHistoryRecord[] = [];
  let cursor: string | null = null;
  while (records.length < cap) {
    const limit = Math.min(1_000, cap - records.length);
    const page: JobHistoryRecord[] = (await admin.listHistory({ since, limit, cursor })).records;
    records.push(...page);
    const last = page[page.length - 1];
    if (!last || page.length < limit) return { records, truncated: false };
    cursor = historyCursor(last);
  }
  return { records, truncated: true };
}

/**
 * A read that groups the whole live table (the overview's counts), shared by concurrent page
 * views and, when it is slow, reused for a while: for at least 5 s and ten times as long as it
 * took, so an expensive count (SQLite, millions of rows) occupies the database at most ~10% of
 * the time however often operators reload. A cheap one is read fresh every time.
 */
export class SlowReadCache<T> {
  private value: { data: T; at: number; costMs: number } | null = null;
  private inflight: Promise<{ data: T; at: number; costMs: number }> | null = null;

  /** Reads above this are cached. */
  static readonly SLOW_MS = 250;

  async read(load: () => Promise<T>): Promise<{ data: T; ageMs: number; costMs: number }> {
    const cached = this.value;
    if (cached && cached.costMs > SlowReadCache.SLOW_MS) {
      const ageMs = Date.now() - cached.at;
      if (ageMs < Math.max(5_000, cached.costMs * 10))
        return { data: cached.data, ageMs, costMs: cached.costMs };
    }
    if (!this.inflight) {
      const started = Date.now();
      this.inflight = load()
        .then((data) => {
          this.value = { data, at: Date.now(), costMs: Date.now() - started };
          return this.value;
        })
        .finally(() => {
          this.inflight = null;
        });
    }
    const fresh = await this.inflight;
    return { data: fresh.data, ageMs: Date.now() - fresh.at, costMs: fresh.costMs };
  }
}
