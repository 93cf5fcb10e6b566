/**
 * Jobs: filter by state, type, queue, scope, tenant and key; keyset paging (id order), so the
 * thousandth page costs what the first does; a count capped at 10,000 instead of a COUNT(*)
 * over the whole table.
 */
import { JOB_STATES, type JobFilter, type JobState } from '@jobs/core';
import { type Ctx, href } from '../context.js';
import { cappedCount as capText, clip, count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, page } from '../layout.js';
import {
  COUNT_CAP,
  cappedCount,
  estimatedJobs,
  PAGE_SIZE,
  readJobsPage,
  type ShownJob,
} from '../reads.js';
import { scopeLimitText } from '../text.js';

/** Filter fields: query parameter → `JobFilter` field. */
const TEXT_FILTERS = [
  ['type', 'type'],
  ['queue', 'queue'],
  ['scope', 'scope'],
  ['tenant', 'tenantId'],
  ['key', 'key'],
] as const;

export function filterOf(query: URLSearchParams): {
  filter: JobFilter;
  params: Record<string, string>;
} {
  const filter: JobFilter = {};
  const params: Record<string, string> = {};
  const state = query.get('state') ?? '';
  if (JOB_STATES.includes(state as JobState)) {
    filter.state = state as JobState;
    params.state = state;
  }
  for (const [param, field] of TEXT_FILTERS) {
    const value = (query.get(param) ?? '').trim();
    if (value !== '') {
      filter[field] = value;
      params[param] = value;
    }
  }
  return { filter, params };
}

export function jobRow(ctx: Ctx, job: ShownJob): SafeHtml {
  const error = job.lastError?.message;
  const limit = job.scope === null ? null : scopeLimitText(job);
  return html`<tr><td class="mono id"><a href="${href(ctx, `/jobs/${encodeURIComponent(job.id)}`)}">${job.id}</a></td>
<td class="wrap">${shortName(job.type)}</td><td>${badge(job.state)}${job.cancelRequested ? html` ${badge('bad', 'cancel requested')}` : ''}</td><td class="wrap">${shortName(job.queue, 40)}</td>
<td class="mono small">${shortName(job.scope ?? '')}${limit ? html` <span class="muted">(${limit})</span>` : ''}${job.tenantId ? html`<div class="muted">tenant ${shortName(job.tenantId, 40)}</div>` : ''}</td>
<td class="num">${job.attempts}</td><td>${timeCell(job.dueAt, ctx.now)}</td><td>${timeCell(job.createdAt, ctx.now)}</td>
<td class="small">${error ? html`<span class="err" title="${clip(error, 500)}">${clip(error, 80)}</span>` : ''}${job.lockOwner ? html`<div class="muted mono">${job.lockOwner}</div>` : ''}</td></tr>`;
}

export function jobsTable(ctx: Ctx, jobs: readonly ShownJob[]): SafeHtml {
  return html`<table><thead><tr><th>ID</th><th>Type</th><th>State</th><th>Queue</th><th>Scope</th><th class="num">Attempts</th><th>Due</th><th>Created</th><th>Last error / owner</th></tr></thead>
<tbody>${jobs.map((job) => jobRow(ctx, job))}</tbody></table>`;
}

export async function jobsPage(ctx: Ctx): Promise<SafeHtml> {
  const { filter, params } = filterOf(ctx.query);
  const afterRaw = ctx.query.get('after');
  const afterId = afterRaw && afterRaw.length <= 64 ? afterRaw : null;
  const offset = Math.max(
    0,
    Math.min(Number.parseInt(ctx.query.get('offset') ?? '0', 10) || 0, 1e9),
  );
  const [result, total] = await Promise.all([
    readJobsPage(ctx.store, filter, { afterId, offset: afterId === null ? 0 : offset }),
    cappedCount(ctx.store, filter),
  ]);
  // Past the cap, an unfiltered list can still say how big the table is: the database's estimate.
  const estimate =
    total !== null && total >= COUNT_CAP && Object.keys(filter).length === 0
      ? await estimatedJobs(ctx.store)
      : null;
  const totalText =
    total === null
      ? ''
      : `${capText(total, COUNT_CAP)}${estimate === null ? '' : ` (≈${count(estimate)})`}`;
  const from = afterId === null ? 0 : offset;
  const last = result.jobs[result.jobs.length - 1];
  const input = (name: string, label: string, placeholder: string): SafeHtml =>
    html`<label>${label}<input name="${name}" value="${params[name] ?? ''}" placeholder="${placeholder}"></label>`;
  const body = html`<h1>Jobs${total === null ? '' : html`<span class="count-pill" title="counted up to ${count(COUNT_CAP - 1)}${estimate === null ? '' : '; ≈ is the database’s estimate of the whole table'}">${totalText}</span>`}</h1>
<div class="card"><form class="filters" method="get" action="${href(ctx, '/jobs')}">
<label>State<select name="state"><option value="">any</option>${JOB_STATES.map(
    (s) => html`<option value="${s}"${params.state === s ? html` selected` : ''}>${s}</option>`,
  )}</select></label>
${input('type', 'Type', 'send-email')}${input('queue', 'Queue', 'default')}${input('scope', 'Scope', 'acct-1')}${input('tenant', 'Tenant', 'tenant id')}${input('key', 'Key', 'unique key')}
<button type="submit" class="primary">Filter</button><a href="${href(ctx, '/jobs')}">Clear</a></form>
${
  result.jobs.length === 0 ? html`<p class="muted">No jobs match.</p>` : jobsTable(ctx, result.jobs)
}
<div class="pager"><span>Rows ${count(result.jobs.length === 0 ? 0 : from + 1)}–${count(from + result.jobs.length)}${total === null ? '' : html` of ${totalText}`}${result.keyset ? '' : html` <span class="small">(offset paging: the store has no keyset paging)</span>`}</span>
<span class="links">${afterId === null ? html`<span class="off">« First</span>` : html`<a href="${href(ctx, '/jobs', params)}">« First</a>`}
${result.hasMore && last ? html`<a rel="next" href="${href(ctx, '/jobs', { ...params, after: last.id, offset: from + result.jobs.length })}">Next ${PAGE_SIZE} »</a>` : html`<span class="off">Next »</span>`}</span></div></div>`;
  return page(ctx, 'Jobs', body);
}
