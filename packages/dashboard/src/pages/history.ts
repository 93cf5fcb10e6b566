/** History: finished jobs, newest first, with outcome, duration and result; keyset-paged. */
import { HISTORY_OUTCOMES, type HistoryOutcome, type JobHistoryRecord } from '@jobs/core';
import { type Ctx, href } from '../context.js';
import { clip, count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, page } from '../layout.js';
import { PAGE_SIZE } from '../reads.js';
import { duration } from '../text.js';

/** `<finishedAt ms>.<id>` → keyset position. */
function readCursor(text: string | null): { finishedAt: Date; id: string } | null {
  const match = /^(\d{1,15})\.(.{1,64})$/.exec(text ?? '');
  return match ? { finishedAt: new Date(Number(match[1])), id: match[2] as string } : null;
}

function resultText(record: JobHistoryRecord): string {
  if (record.outcome !== 'completed') return record.lastError?.message ?? '';
  if (record.result === null || record.result === undefined) return '';
  try {
    return JSON.stringify(record.result);
  } catch {
    return String(record.result);
  }
}

export async function historyPage(ctx: Ctx): Promise<SafeHtml> {
  if (!ctx.store.listHistory) {
    return page(
      ctx,
      'History',
      html`<h1>History</h1><div class="notice warn">This store keeps no history (it has no <code>listHistory</code>).</div>`,
    );
  }
  const type = (ctx.query.get('type') ?? '').trim();
  const outcomeRaw = ctx.query.get('outcome') ?? '';
  const outcome = HISTORY_OUTCOMES.includes(outcomeRaw as HistoryOutcome)
    ? (outcomeRaw as HistoryOutcome)
    : undefined;
  const after = readCursor(ctx.query.get('cursor'));
  const records = await ctx.store.listHistory({
    ...(type ? { type } : {}),
    ...(outcome ? { outcome } : {}),
    limit: PAGE_SIZE + 1,
    after,
  });
  const shown = records.slice(0, PAGE_SIZE);
  const last = shown[shown.length - 1];
  const params = { type, outcome };
  const body = html`<h1>History</h1><div class="card">
<form class="filters" method="get" action="${href(ctx, '/history')}">
<label>Type<input name="type" value="${type}" placeholder="any type"></label>
<label>Outcome<select name="outcome"><option value="">any</option>${HISTORY_OUTCOMES.map((o) => html`<option value="${o}"${o === outcome ? html` selected` : ''}>${o}</option>`)}</select></label>
<button type="submit" class="primary">Filter</button><a href="${href(ctx, '/history')}">Clear</a></form>
${
  shown.length === 0
    ? html`<p class="muted">No finished jobs recorded${type || outcome ? ' that match' : ''}. History keeps what the engine's <code>history</code> option says (default: failed only).</p>`
    : html`<table><thead><tr><th>ID</th><th>Type</th><th>Outcome</th><th>Finished</th><th class="num">Duration</th><th class="num">Attempts</th><th>Owner</th><th>Result / error</th></tr></thead><tbody>
${shown.map(
  (
    r,
  ) => html`<tr><td class="mono"><a href="${href(ctx, `/jobs/${encodeURIComponent(r.id)}`)}">${r.id}</a></td><td class="wrap">${shortName(r.type)}</td><td>${badge(r.outcome)}</td>
<td>${timeCell(r.finishedAt, ctx.now)}</td><td class="num">${r.durationMs === null ? '' : duration(r.durationMs)}</td><td class="num">${r.attempts}</td>
<td class="mono small">${r.lockOwner ?? ''}</td><td class="small mono${r.outcome === 'completed' ? '' : ' err'}">${clip(resultText(r), 100)}</td></tr>`,
)}</tbody></table>`
}
<div class="pager"><span>${count(shown.length)} shown</span><span class="links">${after ? html`<a href="${href(ctx, '/history', params)}">« Newest</a>` : html`<span class="off">« Newest</span>`}
${records.length > PAGE_SIZE && last ? html`<a rel="next" href="${href(ctx, '/history', { ...params, cursor: `${last.finishedAt.getTime()}.${last.id}` })}">Older »</a>` : html`<span class="off">Older »</span>`}</span></div></div>`;
  return page(ctx, 'History', body);
}
