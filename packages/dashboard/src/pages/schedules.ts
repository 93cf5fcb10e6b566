/** Schedules: trigger, next fire times in the schedule's time zone, fired/skipped, pause/resume. */
import { createTrigger, type NormalizedScheduleOptions, type ScheduleRecord } from '@jobs/core';
import { actionForm, href, type PageRequest } from '../context.js';
import { count, inZone, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, numHead, page, tableHead } from '../layout.js';

/** Fire times shown per schedule. */
const NEXT_FIRES = 3;

/** The engine's stored spec (`{ v: 1, options, anchor }`); null when unreadable. */
function readSpec(
  record: ScheduleRecord,
): { options: NormalizedScheduleOptions; anchor: string } | null {
  const spec = record.spec as {
    v?: unknown;
    options?: NormalizedScheduleOptions;
    anchor?: unknown;
  } | null;
  if (spec?.v !== 1 || !spec.options || typeof spec.anchor !== 'string') return null;
  return { options: spec.options, anchor: spec.anchor };
}

function nextFires(record: ScheduleRecord, spec: ReturnType<typeof readSpec>): Date[] {
  if (!record.nextAt) return [];
  const fires = [record.nextAt];
  if (!spec) return fires;
  try {
    const trigger = createTrigger(spec.options, Date.parse(spec.anchor));
    let t = record.nextAt.getTime();
    while (fires.length < NEXT_FIRES) {
      const next = trigger.after(t);
      if (next === null) break;
      fires.push(new Date(next));
      t = next;
    }
  } catch {
    // An unreadable trigger still shows the stored next fire time.
  }
  return fires;
}

function triggerText(options: NormalizedScheduleOptions | undefined): string {
  if (!options) return 'unreadable spec';
  if (options.cron !== null) return `cron ${options.cron}`;
  if (options.every !== null) return `every ${options.every}`;
  return `repeat ${options.repeat ?? '?'}`;
}

function scheduleColumns(ctx: PageRequest): SafeHtml {
  return tableHead([
    'Name',
    'Type',
    'Trigger',
    'Next fires (schedule time zone)',
    numHead('Fired'),
    numHead('Skipped'),
    'Overlap',
    'State',
    ...(ctx.canAct ? [''] : []),
  ]);
}

/** The next fire times in the schedule's zone, the first also relative to now. */
function firesCell(ctx: PageRequest, fires: readonly Date[], zone: string): SafeHtml {
  if (fires.length === 0) return html`<span class="muted">no more occurrences</span>`;
  return html`${fires.map((f, i) => {
    const relative = i === 0 ? html` · ${timeCell(f, ctx.now)}` : '';
    return html`<div class="mono${i > 0 ? ' muted' : ''}" title="${f.toISOString()}">${inZone(f, zone)}${relative}</div>`;
  })}`;
}

function pauseForm(ctx: PageRequest, r: ScheduleRecord): SafeHtml {
  const path = `/schedules/${encodeURIComponent(r.name)}`;
  if (r.paused) return actionForm(ctx, `${path}/resume`, 'Resume', { kind: 'primary' });
  const confirm = `Pause schedule ${r.name}? It fires nothing until resumed.`;
  return actionForm(ctx, `${path}/pause`, 'Pause', { confirm });
}

function scheduleRow(ctx: PageRequest, r: ScheduleRecord): SafeHtml {
  const spec = readSpec(r);
  const zone = spec?.options.timezone ?? 'UTC';
  const type = spec
    ? html`<a href="${href(ctx, '/jobs', { type: spec.options.type })}">${spec.options.type}</a>`
    : '';
  const shards =
    spec && spec.options.shards > 1
      ? html`<div class="muted small">${spec.options.shards} shards</div>`
      : '';
  const misfire = r.pendingMisfire ? html` ${badge('running', 'misfire pending')}` : '';
  return html`<tr><td class="mono">${r.name}</td>
<td>${type}</td>
<td class="mono small">${triggerText(spec?.options)}<div class="muted">${zone}</div></td>
<td class="small">${firesCell(ctx, nextFires(r, spec), zone)}</td>
<td class="num">${count(r.fired)}</td><td class="num">${count(r.skipped)}</td><td>${spec?.options.overlap ?? ''}${shards}</td>
<td>${r.paused ? badge('paused') : badge('active')}${misfire}</td>
${ctx.canAct ? html`<td>${pauseForm(ctx, r)}</td>` : ''}</tr>`;
}

export async function schedulesPage(ctx: PageRequest): Promise<SafeHtml> {
  const records = (await ctx.admin.scheduleRecords()).sort((a, b) => a.name.localeCompare(b.name));
  const define = html`Define one with <code>engine.schedule(name, { cron })</code>.`;
  const table =
    records.length === 0
      ? html`<p class="muted">No schedules. ${define}</p>`
      : html`<table>${scheduleColumns(ctx)}<tbody>
${records.map((r) => scheduleRow(ctx, r))}</tbody></table>`;
  const pill = html`<span class="count-pill">${count(records.length)}</span>`;
  const body = html`<h1>Schedules${pill}</h1><div class="card">${table}</div>`;
  return page(ctx, 'Schedules', body);
}
