/**
 * Dead-letter area: jobs grouped by type and error message; bulk retry or delete of a group
 * (or of a whole type), always through a dry run that says how many jobs it would touch.
 */
import { actionForm, href, type PageRequest } from '../context.js';
import { clip, count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { numHead, page, tableHead } from '../layout.js';
import { GROUP_SCAN_CAP, scanJobs } from '../reads.js';

interface Group {
  type: string;
  message: string;
  count: number;
  oldest: Date;
  newest: Date;
  sampleId: string;
}

export async function deadletterPage(
  ctx: PageRequest,
  extra: SafeHtml = html``,
): Promise<SafeHtml> {
  const type = (ctx.query.get('type') ?? '').trim();
  const filter = { state: 'deadletter' as const, ...(type ? { type } : {}) };
  const { jobs, truncated } = await scanJobs(ctx.admin, filter, GROUP_SCAN_CAP);
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
  const shown = truncated ? `${count(GROUP_SCAN_CAP)}+` : count(jobs.length);
  const table =
    sorted.length === 0
      ? html`<p class="muted">The dead-letter area is empty.</p>`
      : html`<table>${groupColumns(ctx)}<tbody>
${sorted.map((g) => groupRow(ctx, g))}</tbody></table>`;
  const rest = type ? '' : ': filter by type to see the rest';
  const note = truncated
    ? html`<p class="muted small">Grouped the first ${count(GROUP_SCAN_CAP)} dead-letter jobs${rest}.</p>`
    : '';
  const body = html`<h1>Dead letter<span class="count-pill">${shown}</span></h1>
${extra}
<div class="card">${filterForm(ctx, type)}
${table}
${note}
</div>`;
  return page(ctx, 'Dead letter', body);
}

/** A bulk form's first step: a dry run of `op` on a group (or, without `message`, a whole type). */
function dryRunForm(
  ctx: PageRequest,
  g: { type: string; message?: string },
  op: 'retry' | 'delete',
  label: string,
): SafeHtml {
  const fields: Record<string, string> = { op, type: g.type };
  if (g.message !== undefined) fields.message = g.message;
  fields.dryRun = '1';
  return actionForm(ctx, '/deadletter/bulk', label, {
    fields,
    kind: op === 'delete' ? 'danger' : undefined,
  });
}

/** The bulk forms for every dead-letter job of `type`. */
function wholeTypeForms(ctx: PageRequest, type: string): SafeHtml {
  const retry = dryRunForm(ctx, { type }, 'retry', `Retry all ${type}…`);
  const remove = dryRunForm(ctx, { type }, 'delete', `Delete all ${type}…`);
  return html`<span class="actions">${retry}${remove}</span>`;
}

/** Filter by type; with one, the bulk forms for the whole type. */
function filterForm(ctx: PageRequest, type: string): SafeHtml {
  const whole = type && ctx.canAct ? wholeTypeForms(ctx, type) : '';
  return html`<form class="filters" method="get" action="${href(ctx, '/deadletter')}">
<label>Type<input name="type" value="${type}" placeholder="any type"></label><button type="submit" class="primary">Filter</button>
<a href="${href(ctx, '/deadletter')}">Clear</a>
${whole}</form>`;
}

function groupColumns(ctx: PageRequest): SafeHtml {
  const bulk = ctx.canAct ? [html`<th>Bulk (dry run first)</th>`] : [];
  return tableHead(['Type', 'Error', numHead('Jobs'), 'Oldest', 'Newest', 'Example', ...bulk]);
}

function groupRow(ctx: PageRequest, g: Group): SafeHtml {
  const jobs = href(ctx, '/jobs', { state: 'deadletter', type: g.type });
  const error =
    g.message === '' ? html`<span class="muted">(no error)</span>` : clip(g.message, 120);
  const sample = href(ctx, `/jobs/${encodeURIComponent(g.sampleId)}`);
  const forms = [dryRunForm(ctx, g, 'retry', 'Retry…'), dryRunForm(ctx, g, 'delete', 'Delete…')];
  const bulk = ctx.canAct ? html`<td><div class="actions">${forms}</div></td>` : '';
  return html`<tr><td class="wrap"><a href="${jobs}">${shortName(g.type)}</a></td>
<td class="err small" title="${clip(g.message, 1000)}">${error}</td>
<td class="num">${count(g.count)}</td><td>${timeCell(g.oldest, ctx.now)}</td><td>${timeCell(g.newest, ctx.now)}</td>
<td class="mono"><a href="${sample}">${g.sampleId}</a></td>
${bulk}</tr>`;
}
