/** History: finished jobs, newest first, with outcome, duration and result; keyset-paged. */
import {
  HISTORY_OUTCOMES,
  type HistoryOutcome,
  historyCursor,
  type JobHistoryRecord,
} from '@jobs/core';
import { href, type PageRequest } from '../context.js';
import { clip, count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, numHead, page, tableHead } from '../layout.js';
import { PAGE_SIZE } from '../reads.js';
import { duration } from '../text.js';

/** `<finishedAt ms>.<id>` → keyset position (its form and range checked before: params.ts). */
function readCursor(text: string | null): { finishedAt: Date; id: string } | null {
  const match = /^(\d{1,15})\.(.+)$/s.exec(text ?? '');
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

const HISTORY_COLUMNS = tableHead([
  'ID',
  'Type',
  'Outcome',
  'Finished',
  numHead('Duration'),
  numHead('Attempts'),
  'Owner',
  'Result / error',
]);

function historyRow(ctx: PageRequest, r: JobHistoryRecord): SafeHtml {
  const link = html`<a href="${href(ctx, `/jobs/${encodeURIComponent(r.id)}`)}">${r.id}</a>`;
  const result = html`${clip(resultText(r), 100)}`;
  return html`<tr><td class="mono">${link}</td><td class="wrap">${shortName(r.type)}</td><td>${badge(r.outcome)}</td>
<td>${timeCell(r.finishedAt, ctx.now)}</td><td class="num">${r.durationMs === null ? '' : duration(r.durationMs)}</td>
<td class="num">${r.attempts}</td><td class="mono small">${r.lockOwner ?? ''}</td>
<td class="small mono${r.outcome === 'completed' ? '' : ' err'}">${result}</td></tr>`;
}

function filterForm(ctx: PageRequest, type: string, outcome: HistoryOutcome | undefined): SafeHtml {
  const option = (o: HistoryOutcome): SafeHtml =>
    html`<option value="${o}"${o === outcome ? html` selected` : ''}>${o}</option>`;
  return html`<form class="filters" method="get" action="${href(ctx, '/history')}">
<label>Type<input name="type" value="${type}" placeholder="any type"></label>
<label>Outcome<select name="outcome"><option value="">any</option>${HISTORY_OUTCOMES.map(option)}</select></label>
<button type="submit" class="primary">Filter</button><a href="${href(ctx, '/history')}">Clear</a></form>`;
}

export async function historyPage(ctx: PageRequest): Promise<SafeHtml> {
  if (!ctx.admin.keepsHistory) {
    const none = html`This store keeps no history (it has no <code>listHistory</code>).`;
    return page(ctx, 'History', html`<h1>History</h1><div class="notice warn">${none}</div>`);
  }
  const type = (ctx.query.get('type') ?? '').trim();
  const outcomeRaw = ctx.query.get('outcome') ?? '';
  const outcome = HISTORY_OUTCOMES.includes(outcomeRaw as HistoryOutcome)
    ? (outcomeRaw as HistoryOutcome)
    : undefined;
  const after = readCursor(ctx.query.get('cursor'));
  const { records } = await ctx.admin.listHistory({
    ...(type ? { type } : {}),
    ...(outcome ? { outcome } : {}),
    limit: PAGE_SIZE + 1,
    cursor: after && historyCursor(after),
  });
  const shown = records.slice(0, PAGE_SIZE);
  const last = shown[shown.length - 1];
  const params = { type, outcome };
  const keeps = html`History keeps what the engine's <code>history</code> option says (default: failed only).`;
  const table =
    shown.length === 0
      ? html`<p class="muted">No finished jobs recorded${type || outcome ? ' that match' : ''}. ${keeps}</p>`
      : html`<table>${HISTORY_COLUMNS}<tbody>
${shown.map((r) => historyRow(ctx, r))}</tbody></table>`;
  const newest = after
    ? html`<a href="${href(ctx, '/history', params)}">« Newest</a>`
    : html`<span class="off">« Newest</span>`;
  const cursor = last ? `${last.finishedAt.getTime()}.${last.id}` : '';
  const older =
    records.length > PAGE_SIZE && last
      ? html`<a rel="next" href="${href(ctx, '/history', { ...params, cursor })}">Older »</a>`
      : html`<span class="off">Older »</span>`;
  const body = html`<h1>History</h1><div class="card">
${filterForm(ctx, type, outcome)}
${table}
<div class="pager"><span>${count(shown.length)} shown</span><span class="links">${newest}
${older}</span></div></div>`;
  return page(ctx, 'History', body);
}
