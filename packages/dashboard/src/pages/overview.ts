/**
 * Overview: counts by state per queue and type, jobs started/completed/failed per minute over the
 * last hour, the oldest due job's age, running jobs per owner with their lease expiry.
 */
import { isWaitingState, JOB_STATES, type JobState } from '@jobs/core';
import { addEvent, barChart, emptySeries } from '../chart.js';
import { type Ctx, type GroupedCounts, href } from '../context.js';
import { count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, page } from '../layout.js';
import { estimatedJobs, recentHistory, scanJobs } from '../reads.js';
import { duration } from '../text.js';

/** History records read for the chart at most (a busy hour is sampled, and says so). */
const CHART_CAP = 5_000;
/** Running jobs read for the per-owner table at most. */
const RUNNING_CAP = 2_000;

interface Group {
  queue: string | null;
  type: string;
  counts: Record<JobState, number>;
  due: number;
  oldestDue: Date | null;
}

const zero = (): Record<JobState, number> =>
  Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;

/**
 * Grouped counts: `queueStats` when the store has it, else `stats()` (no queues, no due times).
 * Grouping the whole live table costs what the table holds (0.4 s on PostgreSQL, 2 s on SQLite
 * at 1M jobs), so a table above `countLimit` jobs — by the database's estimate, else by a count
 * capped just above the limit — has only its newest `countLimit` jobs grouped.
 */
export async function loadCounts(ctx: Ctx): Promise<GroupedCounts> {
  const { store } = ctx;
  const limit = ctx.settings.countLimit;
  if (store.queueStats) {
    const estimate = await estimatedJobs(store);
    const large =
      (estimate !== null && estimate > limit) ||
      (store.countJobs !== undefined && (await store.countJobs({}, limit + 1)) > limit);
    if (!large) return { perQueue: true, rows: await store.queueStats(), bounded: null };
    const rows = await store.queueStats({ newest: limit });
    // Fewer than the limit: the estimate was stale and every job was counted. More: the store
    // ignored `newest` and counted them all.
    const counted = rows.reduce((sum, row) => sum + row.count, 0);
    const bounded = counted === limit ? { newest: limit, estimate } : null;
    return { perQueue: true, rows, bounded };
  }
  const epoch = new Date(0);
  const rows = (await ctx.store.stats()).map((row) => ({
    ...row,
    queue: '',
    due: 0,
    oldestDueAt: epoch,
  }));
  return { perQueue: false, rows, bounded: null };
}

async function readGroups(ctx: Ctx): Promise<{
  groups: Group[];
  perQueue: boolean;
  bounded: GroupedCounts['bounded'];
  ageMs: number;
  costMs: number;
}> {
  const { data, ageMs, costMs } = await ctx.settings.groupedCounts.read(() => loadCounts(ctx));
  const groups = new Map<string, Group>();
  for (const row of data.rows) {
    const id = `${row.queue}\u0000${row.type}`;
    let group = groups.get(id);
    if (!group) {
      group = {
        queue: data.perQueue ? row.queue : null,
        type: row.type,
        counts: zero(),
        due: 0,
        oldestDue: null,
      };
      groups.set(id, group);
    }
    group.counts[row.state] += row.count;
    if (data.perQueue && isWaitingState(row.state) && row.due > 0) {
      group.due += row.due;
      if (!group.oldestDue || row.oldestDueAt < group.oldestDue) group.oldestDue = row.oldestDueAt;
    }
  }
  return {
    groups: [...groups.values()],
    perQueue: data.perQueue,
    bounded: data.bounded,
    ageMs,
    costMs,
  };
}

function stat(label: string, value: string, sub: SafeHtml | string = ''): SafeHtml {
  return html`<div class="card stat"><div class="label">${label}</div><div class="value">${value}</div><div class="sub">${sub}</div></div>`;
}

export async function overviewPage(ctx: Ctx): Promise<SafeHtml> {
  const { groups, perQueue, bounded, ageMs, costMs } = await readGroups(ctx);
  groups.sort(
    (a, b) => (a.queue ?? '').localeCompare(b.queue ?? '') || a.type.localeCompare(b.type),
  );
  const total = zero();
  let due = 0;
  let oldestDue: Date | null = null;
  for (const g of groups) {
    for (const s of JOB_STATES) total[s] += g.counts[s];
    due += g.due;
    if (g.oldestDue && (!oldestDue || g.oldestDue < oldestDue)) oldestDue = g.oldestDue;
  }
  const all = JOB_STATES.reduce((sum, s) => sum + total[s], 0);

  const since = new Date(ctx.now - 60 * 60_000);
  const history = await recentHistory(ctx.store, since, CHART_CAP);
  const series = emptySeries(60);
  for (const record of history?.records ?? []) {
    const finished = record.finishedAt.getTime();
    if (record.outcome === 'completed') addEvent(series, 'completed', finished, ctx.now);
    else addEvent(series, 'failed', finished, ctx.now);
    if (record.durationMs !== null)
      addEvent(series, 'started', finished - record.durationMs, ctx.now);
  }

  const running = await scanJobs(ctx.store, { state: 'running' }, RUNNING_CAP);
  const owners = new Map<
    string,
    { n: number; first: Date | null; last: Date | null; expired: number }
  >();
  for (const job of running.jobs) {
    const owner = job.lockOwner ?? '(none)';
    const o = owners.get(owner) ?? { n: 0, first: null, last: null, expired: 0 };
    o.n += 1;
    const at = job.lockExpiresAt;
    if (at) {
      if (!o.first || at < o.first) o.first = at;
      if (!o.last || at > o.last) o.last = at;
      if (at.getTime() < ctx.now) o.expired += 1;
    }
    owners.set(owner, o);
  }

  // Counted over the newest jobs only: each count is a lower bound.
  const atLeast = (n: number): string => (bounded ? `≥${count(n)}` : count(n));
  const newestNote = bounded ? `among the newest ${count(bounded.newest)}` : '';
  const runningCount = bounded
    ? running.truncated
      ? `${count(RUNNING_CAP)}+`
      : count(running.jobs.length)
    : count(total.running);
  const stateLink = (state: JobState, n: number): SafeHtml =>
    n === 0
      ? html`<span class="muted">0</span>`
      : html`<a href="${href(ctx, '/jobs', { state })}">${count(n)}</a>`;

  const body = html`<div class="head"><h1>Overview</h1>
<label class="muted small" title="reload every 5 s"><input type="checkbox" id="auto-refresh"> auto-refresh</label></div>
${
  bounded
    ? html`<div class="notice warn approx" role="note"><p><strong>≈ Approximate counts.</strong> ${
        bounded.estimate === null
          ? `The live table holds more than ${count(bounded.newest)} jobs`
          : `The live table holds ≈${count(bounded.estimate)} jobs (the database’s estimate)`
      }, too many to group on every view: the counts below were counted up to ${count(bounded.newest)} jobs, the newest, so each is a lower bound (≥). <a href="${href(ctx, '/jobs')}">Jobs</a> lists and filters every job.</p></div>`
    : ''
}<div class="grid cols-4">
${
  bounded
    ? stat(
        'Live jobs',
        bounded.estimate === null ? `${count(bounded.newest)}+` : `≈${count(bounded.estimate)}`,
        `${bounded.estimate === null ? '' : 'estimated by the database · '}counted up to ${count(bounded.newest)}`,
      )
    : stat('Live jobs', count(all), html`${count(total.timer)} timer · ${count(total.async)} async`)
}
${stat('Due now', perQueue ? atLeast(due) : '—', perQueue ? (bounded ? newestNote : 'waiting and acquirable') : 'store has no queueStats')}
${stat('Oldest due job', oldestDue ? duration(ctx.now - oldestDue.getTime()) : '—', oldestDue ? html`due ${timeCell(oldestDue, ctx.now)}${bounded ? ` · ${newestNote}` : ''}` : bounded ? `none ${newestNote}` : 'nothing is waiting')}
${stat('Running', runningCount, `${owners.size} owner(s)`)}
${stat('Dead letter', atLeast(total.deadletter), html`<a href="${href(ctx, '/deadletter')}">work the dead-letter area →</a>`)}
${stat('Suspended', atLeast(total.suspended), newestNote)}
</div>
<div class="card"><div class="actions"><h2>Last hour, per minute</h2>
<div class="legend"><span><i class="started"></i>started</span><span><i class="completed"></i>completed</span><span><i class="failed"></i>failed (dead letter, cancelled)</span></div></div>
${history === null ? html`<p class="muted">This store keeps no history (it has no listHistory), so there is nothing to chart.</p>` : barChart(series)}
${history?.truncated ? html`<p class="muted small">Busy hour: the chart shows the latest ${count(CHART_CAP)} finished jobs.</p>` : ''}
<p class="muted small">From history: needs the engine's <code>history: { keep: 'all' }</code>. Failed attempts that are retried are not counted until they end.</p></div>
<div class="card"><h2>Queues${bounded ? html` <span class="muted small">newest ${count(bounded.newest)} jobs</span>` : ''}${ageMs >= 1_000 ? html` <span class="muted small" title="counting every live job takes ${duration(costMs)}: counts are reused for a while">counted ${duration(ageMs)} ago</span>` : ''}</h2>${
    groups.length === 0
      ? html`<p class="muted">No live jobs.</p>`
      : html`<table><thead><tr>${perQueue ? html`<th>Queue</th>` : ''}<th>Type</th>${JOB_STATES.map((s) => html`<th class="num">${badge(s)}</th>`)}${perQueue ? html`<th class="num">Due</th><th>Oldest due</th>` : ''}</tr></thead><tbody>
${groups.map(
  (g) =>
    html`<tr>${perQueue ? html`<td class="wrap"><a href="${href(ctx, '/jobs', { queue: g.queue })}">${shortName(g.queue ?? '', 40)}</a></td>` : ''}<td class="wrap"><a href="${href(ctx, '/jobs', { type: g.type, queue: g.queue })}">${shortName(g.type)}</a></td>${JOB_STATES.map(
      (s) =>
        html`<td class="num">${g.counts[s] === 0 ? html`<span class="muted">0</span>` : html`<a href="${href(ctx, '/jobs', { state: s, type: g.type, queue: g.queue })}">${count(g.counts[s])}</a>`}</td>`,
    )}${perQueue ? html`<td class="num">${count(g.due)}</td><td>${timeCell(g.oldestDue, ctx.now)}</td>` : ''}</tr>`,
)}
<tr><td${perQueue ? html` colspan="2"` : ''}><strong>All</strong></td>${JOB_STATES.map((s) => html`<td class="num"><strong>${stateLink(s, total[s])}</strong></td>`)}${perQueue ? html`<td class="num"><strong>${count(due)}</strong></td><td></td>` : ''}</tr>
</tbody></table>`
  }</div>
<div class="card"><h2>Running, per owner</h2>${
    owners.size === 0
      ? html`<p class="muted">Nothing is running.</p>`
      : html`<table><thead><tr><th>Owner</th><th class="num">Running</th><th>First lease expiry</th><th>Last lease expiry</th><th class="num">Expired leases</th></tr></thead><tbody>
${[...owners.entries()].map(
  ([owner, o]) =>
    html`<tr><td class="mono">${owner}</td><td class="num">${count(o.n)}</td><td>${timeCell(o.first, ctx.now)}</td><td>${timeCell(o.last, ctx.now)}</td><td class="num">${o.expired > 0 ? html`<span class="badge bad" title="the owner stopped renewing; recovery requeues them">${count(o.expired)}</span>` : '0'}</td></tr>`,
)}</tbody></table>${running.truncated ? html`<p class="muted small">Showing owners of the first ${count(RUNNING_CAP)} running jobs.</p>` : ''}`
  }</div>`;
  return page(ctx, 'Overview', body);
}
