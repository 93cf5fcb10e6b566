/**
 * The read-only JSON API beside the pages (same filters, same paging, same capped counts), for
 * scripts and monitors: `GET <base>/api/stats`, `GET <base>/api/jobs?state=…&after=…`,
 * `GET <base>/api/jobs/<id>`. Times are ISO-8601 strings. Actions stay form-only (CSRF).
 */
import type { PageRequest, RouteParams } from './context.js';
import { filterOf } from './pages/jobs.js';
import { loadCounts } from './pages/overview.js';
import { COUNT_CAP, cappedCount, findJob, readJobsPage } from './reads.js';

export interface ApiResult {
  status: number;
  body: unknown;
}

/** What a JSON route answers: a status and a body (`JSON.stringify`-ed). */
export type ApiRead = (ctx: PageRequest, params: RouteParams) => Promise<ApiResult>;

/** `GET /api/stats`: the overview's grouped counts. */
export const apiStats: ApiRead = async (ctx) => {
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
};

/** `GET /api/jobs?…`: one page of jobs, the next page's position, the capped total. */
export const apiJobs: ApiRead = async (ctx) => {
  const { filter } = filterOf(ctx.query);
  const afterId = ctx.query.get('after');
  const offset = Number(ctx.query.get('offset') || 0); // a whole number (params.ts)
  const [page, total] = await Promise.all([
    readJobsPage(ctx.admin, filter, { afterId: afterId || null, offset: afterId ? offset : 0 }),
    cappedCount(ctx.admin, filter),
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
};

/** `GET /api/jobs/<id>`: the live job, else its history record. */
export const apiJob: ApiRead = async (ctx, params) => {
  const id = params.id as string;
  const found = await findJob(ctx.admin, id);
  return found ? { status: 200, body: found } : { status: 404, body: { error: 'not found' } };
};
