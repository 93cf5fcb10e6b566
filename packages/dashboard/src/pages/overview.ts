/**
 * Overview: counts by state per queue and type, jobs started/completed/failed per minute over the
 * last hour, the oldest due job's age, running jobs per owner with their lease expiry.
 */
import { isWaitingState, JOB_STATES, type Job, type JobState } from '@jobs/core';
import { addEvent, barChart, type ChartSeries, emptySeries } from '../chart.js';
import { type GroupedCounts, href, type PageRequest } from '../context.js';
import { count, shortName, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, numHead, page, tableHead } from '../layout.js';
import { recentHistory, scanJobs } from '../reads.js';
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
export async function loadCounts(ctx: PageRequest): Promise<GroupedCounts> {
  const { admin } = ctx;
  const limit = ctx.settings.countLimit;
  const estimate = await admin.estimateJobs();
  const large =
    (estimate !== null && estimate > limit) ||
    ((await admin.countJobs({}, limit + 1)) ?? 0) > limit;
  const rows = await admin.queueStats(large ? { newest: limit } : {});
  if (rows) {
    // Fewer than the limit: the estimate was stale and every job was counted. More: the store
    // ignored `newest` and counted them all.
    const counted = rows.reduce((sum, row) => sum + row.count, 0);
    const bounded = large && counted === limit ? { newest: limit, estimate } : null;
    return { perQueue: true, rows, bounded };
  }
  const epoch = new Date(0);
  const { byType } = await admin.stats();
  const counts = Object.entries(byType).flatMap(([type, byState]) =>
    JOB_STATES.filter((state) => byState[state] > 0).map((state) => ({
      type,
      state,
      count: byState[state],
      queue: '',
      due: 0,
      oldestDueAt: epoch,
    })),
  );
  return { perQueue: false, rows: counts, bounded: null };
}

async function readGroups(ctx: PageRequest): Promise<{
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
  const parts = html`<div class="label">${label}</div><div class="value">${value}</div>`;
  return html`<div class="card stat">${parts}<div class="sub">${sub}</div></div>`;
}

/** Live jobs by state over every group, what is due, and the oldest due time. */
interface Totals {
  byState: Record<JobState, number>;
  all: number;
  due: number;
  oldestDue: Date | null;
}

/** Running jobs per lease owner: how many, the first and last lease expiry, how many expired. */
interface OwnerRow {
  n: number;
  first: Date | null;
  last: Date | null;
  expired: number;
}

function totalsOf(groups: readonly Group[]): Totals {
  const byState = zero();
  let due = 0;
  let oldestDue: Date | null = null;
  for (const g of groups) {
    for (const s of JOB_STATES) byState[s] += g.counts[s];
    due += g.due;
    if (g.oldestDue && (!oldestDue || g.oldestDue < oldestDue)) oldestDue = g.oldestDue;
  }
  const all = JOB_STATES.reduce((sum, s) => sum + byState[s], 0);
  return { byState, all, due, oldestDue };
}

function ownersOf(jobs: readonly Job[], now: number): Map<string, OwnerRow> {
  const owners = new Map<string, OwnerRow>();
  for (const job of jobs) {
    const owner = job.lockOwner ?? '(none)';
    const o = owners.get(owner) ?? { n: 0, first: null, last: null, expired: 0 };
    o.n += 1;
    const at = job.lockExpiresAt;
    if (at) {
      if (!o.first || at < o.first) o.first = at;
      if (!o.last || at > o.last) o.last = at;
      if (at.getTime() < now) o.expired += 1;
    }
    owners.set(owner, o);
  }
  return owners;
}

/** Jobs started, completed and failed per minute over the last hour; null without history. */
async function lastHour(
  ctx: PageRequest,
): Promise<{ series: ChartSeries; truncated: boolean } | null> {
  const history = await recentHistory(ctx.admin, new Date(ctx.now - 60 * 60_000), CHART_CAP);
  if (history === null) return null;
  const series = emptySeries(60);
  for (const record of history.records) {
    const finished = record.finishedAt.getTime();
    if (record.outcome === 'completed') addEvent(series, 'completed', finished, ctx.now);
    else addEvent(series, 'failed', finished, ctx.now);
    if (record.durationMs !== null)
      addEvent(series, 'started', finished - record.durationMs, ctx.now);
  }
  return { series, truncated: history.truncated };
}

/** Above `countLimit`: says the counts are lower bounds over the newest jobs. */
function approxNotice(ctx: PageRequest, bounded: NonNullable<GroupedCounts['bounded']>): SafeHtml {
  const holds =
    bounded.estimate === null
      ? `The live table holds more than ${count(bounded.newest)} jobs`
      : `The live table holds ≈${count(bounded.estimate)} jobs (the database’s estimate)`;
  const counted = `counted up to ${count(bounded.newest)} jobs, the newest, so each is a lower bound (≥)`;
  const jobs = html`<a href="${href(ctx, '/jobs')}">Jobs</a> lists and filters every job.`;
  const title = html`<strong>≈ Approximate counts.</strong>`;
  const text = `${holds}, too many to group on every view: the counts below were ${counted}.`;
  return html`<div class="notice warn approx" role="note"><p>${title} ${text} ${jobs}</p></div>`;
}

function statCards(
  ctx: PageRequest,
  totals: Totals,
  counts: { perQueue: boolean; bounded: GroupedCounts['bounded'] },
  running: { shown: string; owners: number },
): SafeHtml {
  const { bounded, perQueue } = counts;
  // Counted over the newest jobs only: each count is a lower bound.
  const atLeast = (n: number): string => (bounded ? `≥${count(n)}` : count(n));
  const newestNote = bounded ? `among the newest ${count(bounded.newest)}` : '';
  const live = bounded
    ? stat(
        'Live jobs',
        bounded.estimate === null ? `${count(bounded.newest)}+` : `≈${count(bounded.estimate)}`,
        `${bounded.estimate === null ? '' : 'estimated by the database · '}counted up to ${count(bounded.newest)}`,
      )
    : stat(
        'Live jobs',
        count(totals.all),
        html`${count(totals.byState.timer)} timer · ${count(totals.byState.async)} async`,
      );
  const dueNote = perQueue
    ? bounded
      ? newestNote
      : 'waiting and acquirable'
    : 'store has no queueStats';
  const { oldestDue } = totals;
  const oldestNote = oldestDue
    ? html`due ${timeCell(oldestDue, ctx.now)}${bounded ? ` · ${newestNote}` : ''}`
    : bounded
      ? `none ${newestNote}`
      : 'nothing is waiting';
  const oldest = oldestDue ? duration(ctx.now - oldestDue.getTime()) : '—';
  const deadletter = html`<a href="${href(ctx, '/deadletter')}">work the dead-letter area →</a>`;
  return html`<div class="grid cols-4">
${live}
${stat('Due now', perQueue ? atLeast(totals.due) : '—', dueNote)}
${stat('Oldest due job', oldest, oldestNote)}
${stat('Running', running.shown, `${running.owners} owner(s)`)}
${stat('Dead letter', atLeast(totals.byState.deadletter), deadletter)}
${stat('Suspended', atLeast(totals.byState.suspended), newestNote)}
</div>`;
}

function chartCard(hour: { series: ChartSeries; truncated: boolean } | null): SafeHtml {
  const legend = [
    html`<span><i class="started"></i>started</span>`,
    html`<span><i class="completed"></i>completed</span>`,
    html`<span><i class="failed"></i>failed (dead letter, cancelled)</span>`,
  ];
  const chart =
    hour === null
      ? html`<p class="muted">This store keeps no history (it has no listHistory), so there is nothing to chart.</p>`
      : barChart(hour.series);
  const busy = hour?.truncated
    ? html`<p class="muted small">Busy hour: the chart shows the latest ${count(CHART_CAP)} finished jobs.</p>`
    : '';
  const keep = html`needs the engine's <code>history: { keep: 'all' }</code>`;
  return html`<div class="card"><div class="actions"><h2>Last hour, per minute</h2>
<div class="legend">${legend}</div></div>
${chart}
${busy}
<p class="muted small">From history: ${keep}. Failed attempts that are retried are not counted until they end.</p></div>`;
}

/** A count linking to the jobs it counts (0 plain). */
function countLink(ctx: PageRequest, n: number, filter: Record<string, string | null>): SafeHtml {
  if (n === 0) return html`<span class="muted">0</span>`;
  return html`<a href="${href(ctx, '/jobs', filter)}">${count(n)}</a>`;
}

function queueRow(ctx: PageRequest, g: Group, perQueue: boolean): SafeHtml {
  const queue = perQueue
    ? html`<td class="wrap"><a href="${href(ctx, '/jobs', { queue: g.queue })}">${shortName(g.queue ?? '', 40)}</a></td>`
    : '';
  const type = html`<a href="${href(ctx, '/jobs', { type: g.type, queue: g.queue })}">${shortName(g.type)}</a>`;
  const states = JOB_STATES.map(
    (s) =>
      html`<td class="num">${countLink(ctx, g.counts[s], { state: s, type: g.type, queue: g.queue })}</td>`,
  );
  const due = perQueue
    ? html`<td class="num">${count(g.due)}</td><td>${timeCell(g.oldestDue, ctx.now)}</td>`
    : '';
  return html`<tr>${queue}<td class="wrap">${type}</td>${states}${due}</tr>`;
}

function allRow(ctx: PageRequest, totals: Totals, perQueue: boolean): SafeHtml {
  const states = JOB_STATES.map(
    (s) =>
      html`<td class="num"><strong>${countLink(ctx, totals.byState[s], { state: s })}</strong></td>`,
  );
  const due = perQueue
    ? html`<td class="num"><strong>${count(totals.due)}</strong></td><td></td>`
    : '';
  return html`<tr><td${perQueue ? html` colspan="2"` : ''}><strong>All</strong></td>${states}${due}</tr>`;
}

function queuesCard(
  ctx: PageRequest,
  read: Awaited<ReturnType<typeof readGroups>>,
  totals: Totals,
): SafeHtml {
  const { groups, perQueue, bounded, ageMs, costMs } = read;
  const newest = bounded
    ? html` <span class="muted small">newest ${count(bounded.newest)} jobs</span>`
    : '';
  const reused = `counting every live job takes ${duration(costMs)}: counts are reused for a while`;
  const age =
    ageMs >= 1_000
      ? html` <span class="muted small" title="${reused}">counted ${duration(ageMs)} ago</span>`
      : '';
  const head = tableHead([
    ...(perQueue ? ['Queue'] : []),
    'Type',
    ...JOB_STATES.map((s) => numHead(badge(s))),
    ...(perQueue ? [numHead('Due'), 'Oldest due'] : []),
  ]);
  const table =
    groups.length === 0
      ? html`<p class="muted">No live jobs.</p>`
      : html`<table>${head}<tbody>
${groups.map((g) => queueRow(ctx, g, perQueue))}
${allRow(ctx, totals, perQueue)}
</tbody></table>`;
  return html`<div class="card"><h2>Queues${newest}${age}</h2>${table}</div>`;
}

const OWNER_COLUMNS = tableHead([
  'Owner',
  numHead('Running'),
  'First lease expiry',
  'Last lease expiry',
  numHead('Expired leases'),
]);

function ownersCard(ctx: PageRequest, owners: Map<string, OwnerRow>, truncated: boolean): SafeHtml {
  if (owners.size === 0) {
    return html`<div class="card"><h2>Running, per owner</h2><p class="muted">Nothing is running.</p></div>`;
  }
  const stopped = 'the owner stopped renewing; recovery requeues them';
  const rows = [...owners.entries()].map(([owner, o]) => {
    const expired =
      o.expired > 0
        ? html`<span class="badge bad" title="${stopped}">${count(o.expired)}</span>`
        : '0';
    const leases = html`<td>${timeCell(o.first, ctx.now)}</td><td>${timeCell(o.last, ctx.now)}</td>`;
    return html`<tr><td class="mono">${owner}</td><td class="num">${count(o.n)}</td>${leases}<td class="num">${expired}</td></tr>`;
  });
  const more = truncated
    ? html`<p class="muted small">Showing owners of the first ${count(RUNNING_CAP)} running jobs.</p>`
    : '';
  return html`<div class="card"><h2>Running, per owner</h2><table>${OWNER_COLUMNS}<tbody>
${rows}</tbody></table>${more}</div>`;
}

export async function overviewPage(ctx: PageRequest): Promise<SafeHtml> {
  const read = await readGroups(ctx);
  read.groups.sort(
    (a, b) => (a.queue ?? '').localeCompare(b.queue ?? '') || a.type.localeCompare(b.type),
  );
  const totals = totalsOf(read.groups);
  const hour = await lastHour(ctx);
  const running = await scanJobs(ctx.admin, { state: 'running' }, RUNNING_CAP);
  const owners = ownersOf(running.jobs, ctx.now);
  const runningShown = read.bounded
    ? running.truncated
      ? `${count(RUNNING_CAP)}+`
      : count(running.jobs.length)
    : count(totals.byState.running);
  const refresh = html`<label class="muted small" title="reload every 5 s"><input type="checkbox" id="auto-refresh"> auto-refresh</label>`;
  const body = html`<div class="head"><h1>Overview</h1>
${refresh}</div>
${read.bounded ? approxNotice(ctx, read.bounded) : ''}
${statCards(ctx, totals, read, { shown: runningShown, owners: owners.size })}
${chartCard(hour)}
${queuesCard(ctx, read, totals)}
${ownersCard(ctx, owners, running.truncated)}`;
  return page(ctx, 'Overview', body);
}
