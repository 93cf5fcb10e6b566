/**
 * Dead-letter area: jobs grouped by type and error message; bulk retry or delete of a group
 * (or of a whole type), always through a dry run that says how many jobs it would touch.
 */
import { actionForm, type Ctx, href } from '../context.js';
import { clip, count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { page } from '../layout.js';
import { GROUP_SCAN_CAP, scanJobs } from '../reads.js';

interface Group {
  type: string;
  message: string;
  count: number;
  oldest: Date;
  newest: Date;
  sampleId: string;
}

export async function deadletterPage(ctx: Ctx, extra: SafeHtml = html``): Promise<SafeHtml> {
  const type = (ctx.query.get('type') ?? '').trim();
  const filter = { state: 'deadletter' as const, ...(type ? { type } : {}) };
  const { jobs, truncated } = await scanJobs(ctx.store, filter, GROUP_SCAN_CAP);
  const groups = new Map<string, Group>();
  for (const job of jobs) {
    const message = job.lastError?.message ?? '';
    const id = `${job.type}\u0000${message}`;
    const g = groups.get(id);
    if (g) {
      g.count += 1;
      if (job.createdAt < g.oldest) g.oldest = job.createdAt;
      if (job.createdAt > g.newest) g.newest = job.createdAt;
    } else {
      groups.set(id, {
        type: job.type,
        message,
        count: 1,
        oldest: job.createdAt,
        newest: job.createdAt,
        sampleId: job.id,
      });
    }
  }
  const sorted = [...groups.values()].sort(
    (a, b) => b.count - a.count || a.type.localeCompare(b.type),
  );
  const dry = (
    g: { type: string; message?: string },
    op: 'retry' | 'delete',
    label: string,
  ): SafeHtml =>
    actionForm(ctx, '/deadletter/bulk', label, {
      fields: {
        op,
        type: g.type,
        ...(g.message !== undefined ? { message: g.message } : {}),
        dryRun: '1',
      },
      kind: op === 'delete' ? 'danger' : undefined,
    });
  const body = html`<h1>Dead letter<span class="count-pill">${truncated ? `${count(GROUP_SCAN_CAP)}+` : count(jobs.length)}</span></h1>
${extra}
<div class="card"><form class="filters" method="get" action="${href(ctx, '/deadletter')}">
<label>Type<input name="type" value="${type}" placeholder="any type"></label><button type="submit" class="primary">Filter</button>
<a href="${href(ctx, '/deadletter')}">Clear</a>
${type && ctx.canAct ? html`<span class="actions">${dry({ type }, 'retry', `Retry all ${type}…`)}${dry({ type }, 'delete', `Delete all ${type}…`)}</span>` : ''}</form>
${
  sorted.length === 0
    ? html`<p class="muted">The dead-letter area is empty.</p>`
    : html`<table><thead><tr><th>Type</th><th>Error</th><th class="num">Jobs</th><th>Oldest</th><th>Newest</th><th>Example</th>${ctx.canAct ? html`<th>Bulk (dry run first)</th>` : ''}</tr></thead><tbody>
${sorted.map(
  (
    g,
  ) => html`<tr><td class="wrap"><a href="${href(ctx, '/jobs', { state: 'deadletter', type: g.type })}">${shortName(g.type)}</a></td>
<td class="err small" title="${clip(g.message, 1000)}">${g.message === '' ? html`<span class="muted">(no error)</span>` : clip(g.message, 120)}</td>
<td class="num">${count(g.count)}</td><td>${timeCell(g.oldest, ctx.now)}</td><td>${timeCell(g.newest, ctx.now)}</td>
<td class="mono"><a href="${href(ctx, `/jobs/${encodeURIComponent(g.sampleId)}`)}">${g.sampleId}</a></td>
${ctx.canAct ? html`<td><div class="actions">${dry(g, 'retry', 'Retry…')}${dry(g, 'delete', 'Delete…')}</div></td>` : ''}</tr>`,
)}</tbody></table>`
}
${truncated ? html`<p class="muted small">Grouped the first ${count(GROUP_SCAN_CAP)} dead-letter jobs${type ? '' : ': filter by type to see the rest'}.</p>` : ''}
</div>`;
  return page(ctx, 'Dead letter', body);
}
