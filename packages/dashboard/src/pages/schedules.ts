/** Schedules: trigger, next fire times in the schedule's time zone, fired/skipped, pause/resume. */
import { createTrigger, type NormalizedScheduleOptions, type ScheduleRecord } from '@jobs/core';
import { actionForm, type Ctx, href } from '../context.js';
import { count, inZone, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, page } from '../layout.js';

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

export async function schedulesPage(ctx: Ctx): Promise<SafeHtml> {
  const records = (await ctx.store.listSchedules()).sort((a, b) => a.name.localeCompare(b.name));
  const body = html`<h1>Schedules<span class="count-pill">${count(records.length)}</span></h1><div class="card">${
    records.length === 0
      ? html`<p class="muted">No schedules. Define one with <code>engine.schedule(name, { cron })</code>.</p>`
      : html`<table><thead><tr><th>Name</th><th>Type</th><th>Trigger</th><th>Next fires (schedule time zone)</th><th class="num">Fired</th><th class="num">Skipped</th><th>Overlap</th><th>State</th>${ctx.canAct ? html`<th></th>` : ''}</tr></thead><tbody>
${records.map((r) => {
  const spec = readSpec(r);
  const zone = spec?.options.timezone ?? 'UTC';
  const fires = nextFires(r, spec);
  return html`<tr><td class="mono">${r.name}</td>
<td>${spec ? html`<a href="${href(ctx, '/jobs', { type: spec.options.type })}">${spec.options.type}</a>` : ''}</td>
<td class="mono small">${triggerText(spec?.options)}<div class="muted">${zone}</div></td>
<td class="small">${fires.length === 0 ? html`<span class="muted">no more occurrences</span>` : fires.map((f, i) => html`<div class="mono${i > 0 ? ' muted' : ''}" title="${f.toISOString()}">${inZone(f, zone)}${i === 0 ? html` · ${timeCell(f, ctx.now)}` : ''}</div>`)}</td>
<td class="num">${count(r.fired)}</td><td class="num">${count(r.skipped)}</td><td>${spec?.options.overlap ?? ''}${spec && spec.options.shards > 1 ? html`<div class="muted small">${spec.options.shards} shards</div>` : ''}</td>
<td>${r.paused ? badge('paused') : badge('active')}${r.pendingMisfire ? html` ${badge('running', 'misfire pending')}` : ''}</td>
${ctx.canAct ? html`<td>${r.paused ? actionForm(ctx, `/schedules/${encodeURIComponent(r.name)}/resume`, 'Resume', { kind: 'primary' }) : actionForm(ctx, `/schedules/${encodeURIComponent(r.name)}/pause`, 'Pause', { confirm: `Pause schedule ${r.name}? It fires nothing until resumed.` })}</td>` : ''}</tr>`;
})}</tbody></table>`
  }</div>`;
  return page(ctx, 'Schedules', body);
}
