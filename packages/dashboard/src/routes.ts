/**
 * Every address the dashboard answers, in one table: pages and JSON reads (GET and HEAD), and
 * actions (POST, run after the checks in `dashboard.ts`). A `:name` segment matches one
 * non-empty path segment and reaches the handler decoded, as `params.name`.
 */
import {
  type Action,
  activateJobs,
  bulkAction,
  cancelJob,
  deleteJob,
  pauseSchedule,
  resumeSchedule,
  retryJob,
  suspendJobs,
} from './actions.js';
import { type ApiRead, apiJob, apiJobs, apiStats } from './api.js';
import { type PageRequest, type RouteParams, safeDecode } from './context.js';
import type { SafeHtml } from './html.js';
import { deadletterPage } from './pages/deadletter.js';
import { apiFlow, apiFlows, flowsPage } from './pages/flows.js';
import { historyPage } from './pages/history.js';
import { jobPage } from './pages/job.js';
import { jobsPage } from './pages/jobs.js';
import { overviewPage } from './pages/overview.js';
import { schedulesPage } from './pages/schedules.js';

/** A page: its HTML, or null for 404 (the job it names does not exist). */
export type PageRead = (ctx: PageRequest, params: RouteParams) => Promise<SafeHtml | null>;

export type Route = { pattern: string } & (
  | { method: 'GET'; page: PageRead }
  | { method: 'GET'; api: ApiRead }
  | { method: 'POST'; action: Action }
);

export const ROUTES: readonly Route[] = [
  { method: 'GET', pattern: '/', page: overviewPage },
  { method: 'GET', pattern: '/jobs', page: jobsPage },
  { method: 'GET', pattern: '/jobs/:id', page: (ctx, params) => jobPage(ctx, params.id as string) },
  { method: 'GET', pattern: '/deadletter', page: (ctx) => deadletterPage(ctx) },
  { method: 'GET', pattern: '/flows', page: flowsPage },
  { method: 'GET', pattern: '/schedules', page: schedulesPage },
  { method: 'GET', pattern: '/history', page: historyPage },
  { method: 'GET', pattern: '/api/stats', api: apiStats },
  { method: 'GET', pattern: '/api/jobs', api: apiJobs },
  { method: 'GET', pattern: '/api/jobs/:id', api: apiJob },
  { method: 'GET', pattern: '/api/flows', api: apiFlows },
  { method: 'GET', pattern: '/api/flows/:id', api: apiFlow },
  { method: 'POST', pattern: '/jobs/:id/retry', action: retryJob },
  { method: 'POST', pattern: '/jobs/:id/delete', action: deleteJob },
  { method: 'POST', pattern: '/jobs/:id/cancel', action: cancelJob },
  { method: 'POST', pattern: '/jobs/:id/suspend', action: suspendJobs },
  { method: 'POST', pattern: '/jobs/:id/activate', action: activateJobs },
  { method: 'POST', pattern: '/deadletter/bulk', action: bulkAction },
  { method: 'POST', pattern: '/schedules/:name/pause', action: pauseSchedule },
  { method: 'POST', pattern: '/schedules/:name/resume', action: resumeSchedule },
];

/** The params of `path` under `pattern`, or null when it does not match. */
function match(pattern: string, path: string): RouteParams | null {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i += 1) {
    const segment = want[i] as string;
    const given = got[i] as string;
    if (!segment.startsWith(':')) {
      if (segment !== given) return null;
    } else if (given === '') return null;
    else params[segment.slice(1)] = safeDecode(given);
  }
  return params;
}

/** The route of a request (HEAD is read as GET), or null. */
export function findRoute(
  method: 'GET' | 'POST',
  path: string,
): { route: Route; params: RouteParams } | null {
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const params = match(route.pattern, path);
    if (params) return { route, params };
  }
  return null;
}
