/**
 * Jobs: filter by state, type, queue, scope, tenant and key; keyset paging (id order), so the
 * thousandth page costs what the first does; a count capped at 10,000 instead of a COUNT(*)
 * over the whole table.
 */
import { JOB_STATES, type Job, type JobFilter, type JobState } from '@jobs/core';
import { href, type PageRequest } from '../context.js';
import { cappedCount as capText, clip, count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, numHead, page, tableHead } from '../layout.js';
import { COUNT_CAP, cappedCount, type JobsPage, PAGE_SIZE, readJobsPage } from '../reads.js';
import { jobWait, scopeLimitText } from '../text.js';

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

/** Under a parked job's state: `sleeps · wakes in 5m` or `waits for signal approval · times out in 1d`. */
function waitNote(job: Job, now: number): SafeHtml | string {
  const wait = jobWait(job, now);
  if (!wait) return '';
  const what =
    wait.kind === 'sleep'
      ? html`sleeps · wakes`
      : html`waits for signal <span class="mono">${shortName(wait.signal, 40)}</span> · times out`;
  return html`<div class="muted small wait">${what} ${timeCell(wait.until, now)}</div>`;
}

/** A jobs-list row's cells: id, type, state, queue, scope, attempts, due, created, error/owner. */
function jobRowCells(ctx: PageRequest, job: Job): SafeHtml[] {
  const link = html`<a href="${href(ctx, `/jobs/${encodeURIComponent(job.id)}`)}">${job.id}</a>`;
  const flag = job.cancelRequested ? html` ${badge('bad', 'cancel requested')}` : '';
  const limit = job.scope === null ? null : scopeLimitText(job);
  const limitNote = limit ? html` <span class="muted">(${limit})</span>` : '';
  const tenant = job.tenantId
    ? html`<div class="muted">tenant ${shortName(job.tenantId, 40)}</div>`
    : '';
  const error = job.lastError?.message;
  const errorText = error
    ? html`<span class="err" title="${clip(error, 500)}">${clip(error, 80)}</span>`
    : '';
  const owner = job.lockOwner ? html`<div class="muted mono">${job.lockOwner}</div>` : '';
  return [
    html`<td class="mono id">${link}</td>`,
    html`<td class="wrap">${shortName(job.type)}</td>`,
    html`<td>${badge(job.state)}${flag}${waitNote(job, ctx.now)}</td>`,
    html`<td class="wrap">${shortName(job.queue, 40)}</td>`,
    html`<td class="mono small">${shortName(job.scope ?? '')}${limitNote}${tenant}</td>`,
    html`<td class="num">${job.attempts}</td>`,
    html`<td>${timeCell(job.dueAt, ctx.now)}</td>`,
    html`<td>${timeCell(job.createdAt, ctx.now)}</td>`,
    html`<td class="small">${errorText}${owner}</td>`,
  ];
}

const JOB_COLUMNS = tableHead([
  'ID',
  'Type',
  'State',
  'Queue',
  'Scope',
  numHead('Attempts'),
  'Due',
  'Created',
  'Last error / owner',
]);

export function jobsTable(ctx: PageRequest, jobs: readonly Job[]): SafeHtml {
  const rows = jobs.map((job) => html`<tr>${jobRowCells(ctx, job)}</tr>\n`);
  return html`<table>${JOB_COLUMNS}
<tbody>${rows}</tbody></table>`;
}

/** The filter form: state, and a text field per `TEXT_FILTERS` entry. */
function filterForm(ctx: PageRequest, params: Record<string, string>): SafeHtml {
  const option = (state: JobState): SafeHtml =>
    html`<option value="${state}"${params.state === state ? html` selected` : ''}>${state}</option>`;
  const input = (name: string, label: string, placeholder: string): SafeHtml =>
    html`<label>${label}<input name="${name}" value="${params[name] ?? ''}" placeholder="${placeholder}"></label>`;
  return html`<form class="filters" method="get" action="${href(ctx, '/jobs')}">
<label>State<select name="state"><option value="">any</option>${JOB_STATES.map(option)}</select></label>
${input('type', 'Type', 'send-email')}${input('queue', 'Queue', 'default')}${input('scope', 'Scope', 'acct-1')}
${input('tenant', 'Tenant', 'tenant id')}${input('key', 'Key', 'unique key')}
<button type="submit" class="primary">Filter</button><a href="${href(ctx, '/jobs')}">Clear</a></form>`;
}

export async function jobsPage(ctx: PageRequest): Promise<SafeHtml> {
  const { filter, params } = filterOf(ctx.query);
  // Checked before (params.ts): an id of at most 255 characters, a whole number of at most 1e9.
  const afterId = ctx.query.get('after') || null;
  const offset = Number(ctx.query.get('offset') || 0);
  const [result, total] = await Promise.all([
    readJobsPage(ctx.admin, filter, { afterId, offset: afterId === null ? 0 : offset }),
    cappedCount(ctx.admin, filter),
  ]);
  // Past the cap, an unfiltered list can still say how big the table is: the database's estimate.
  const estimate =
    total !== null && total >= COUNT_CAP && Object.keys(filter).length === 0
      ? await ctx.admin.estimateJobs()
      : null;
  const totalText =
    total === null
      ? ''
      : `${capText(total, COUNT_CAP)}${estimate === null ? '' : ` (≈${count(estimate)})`}`;
  const estimateNote = estimate === null ? '' : '; ≈ is the database’s estimate of the whole table';
  const countTitle = `counted up to ${count(COUNT_CAP - 1)}${estimateNote}`;
  const pill =
    total === null ? '' : html`<span class="count-pill" title="${countTitle}">${totalText}</span>`;
  const list =
    result.jobs.length === 0
      ? html`<p class="muted">No jobs match.</p>`
      : jobsTable(ctx, result.jobs);
  const body = html`<h1>Jobs${pill}</h1>
<div class="card">${filterForm(ctx, params)}
${list}
${pager(ctx, params, result, { afterId, offset, totalText: total === null ? null : totalText })}</div>`;
  return page(ctx, 'Jobs', body);
}

/** Rows shown, of how many, and the links to the first and the next page. */
function pager(
  ctx: PageRequest,
  params: Record<string, string>,
  result: JobsPage,
  at: { afterId: string | null; offset: number; totalText: string | null },
): SafeHtml {
  const from = at.afterId === null ? 0 : at.offset;
  const shown = result.jobs.length;
  const of = at.totalText === null ? '' : html` of ${at.totalText}`;
  const offsetNote = result.keyset
    ? ''
    : html` <span class="small">(offset paging: the store has no keyset paging)</span>`;
  const first =
    at.afterId === null
      ? html`<span class="off">« First</span>`
      : html`<a href="${href(ctx, '/jobs', params)}">« First</a>`;
  const last = result.jobs[shown - 1];
  const nextHref = last
    ? href(ctx, '/jobs', { ...params, after: last.id, offset: from + shown })
    : '';
  const next =
    result.hasMore && last
      ? html`<a rel="next" href="${nextHref}">Next ${PAGE_SIZE} »</a>`
      : html`<span class="off">Next »</span>`;
  const rows = `${count(shown === 0 ? 0 : from + 1)}–${count(from + shown)}`;
  return html`<div class="pager"><span>Rows ${rows}${of}${offsetNote}</span>
<span class="links">${first}
${next}</span></div>`;
}
