/** Reading every job a filter matches, a page at a time (the admin API pages by 1000 at most). */
import type { Job, JobEngine, JobFilter } from '@jobs/core';

/** The admin API's largest page. */
export const PAGE_SIZE = 1000;

/**
 * What `pick` keeps of every job matching `filter`, in id order, read page by page (so a bulk
 * action over many jobs keeps their ids, not their payloads).
 */
export async function listAll<T>(
  engine: JobEngine,
  filter: JobFilter,
  pick: (job: Job) => T,
): Promise<T[]> {
  const out: T[] = [];
  for (let offset = 0; ; offset += PAGE_SIZE) {
    const page = await engine.admin.listJobs({ ...filter, limit: PAGE_SIZE, offset });
    for (const job of page) out.push(pick(job));
    if (page.length < PAGE_SIZE) return out;
  }
}
