/**
 * The read-only JSON API beside the pages (same filters, same paging, same capped counts), for
 * scripts and monitors: `GET <base>/api/stats`, `GET <base>/api/jobs?state=…&after=…`,
 * `GET <base>/api/jobs/<id>`. Times are ISO-8601 strings. Actions stay form-only (CSRF).
 */
import type { Ctx } from './context.js';
import { filterOf } from './pages/jobs.js';
import { loadCounts } from './pages/overview.js';
import { COUNT_CAP, cappedCount, readJobsPage } from './reads.js';

export interface ApiResult {
  status: number;
  body: unknown;
}

export async function apiGet(ctx: Ctx, path: string): Promise<ApiResult | null> {
  if (path === '/stats') {
    const { data, ageMs } = await ctx.settings.groupedCounts.read(() => loadCounts(ctx));
    return {
      status: 200,
      body: {
        now: new Date(ctx.now),
        countedAgoMs: ageMs,
        perQueue: data.perQueue,
        /** Null: every live job was counted; else `groups` count the newest `newest` only. */
        bounded: data.bounded,
        groups: data.rows,
      },
    };
  }
  if (path === '/jobs') {
    const { filter } = filterOf(ctx.query);
    const afterId = ctx.query.get('after');
    const offset = Math.max(0, Number.parseInt(ctx.query.get('offset') ?? '0', 10) || 0);
    const [page, total] = await Promise.all([
      readJobsPage(ctx.store, filter, { afterId: afterId || null, offset: afterId ? offset : 0 }),
      cappedCount(ctx.store, filter),
    ]);
    const last = page.jobs[page.jobs.length - 1];
    const from = afterId ? offset : 0;
    return {
      status: 200,
      body: {
        jobs: page.jobs,
        /** Query parameters of the next page; null on the last one. */
        next: page.hasMore && last ? { after: last.id, offset: from + page.jobs.length } : null,
        /** Matching jobs counted up to `COUNT_CAP - 1`; `totalCapped` says there are more. */
        total: total === null ? null : Math.min(total, COUNT_CAP - 1),
        totalCapped: total !== null && total >= COUNT_CAP,
      },
    };
  }
  const job = /^\/jobs\/([^/]+)$/.exec(path);
  if (job) {
    const id = job[1] as string;
    const found = (await ctx.store.getJob(id)) ?? (await ctx.store.getHistory?.(id)) ?? null;
    return found ? { status: 200, body: found } : { status: 404, body: { error: 'not found' } };
  }
  return null;
}
