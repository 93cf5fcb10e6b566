/**
 * Flows (`engine.flow`, `engine.batch`): the flows page lists live flows (jobs of the flow job's
 * type `$flow`, keyset-paged by id) and recently finished ones (history records of that type,
 * newest first), each with its status, node counts by outcome and age, read from the flow job's
 * own record — its payload and checkpoints — so a page costs two reads of at most a page each,
 * whatever the flows hold. A flow's graph is on its flow job's page (`admin.getFlow`, `graph.ts`).
 * JSON beside it: `GET /api/flows`, `GET /api/flows/<id>`.
 */
import {
  type FlowStatus,
  historyCursor,
  type Job,
  type JobHistoryRecord,
  ValidationError,
} from '@jobs/core';
import type { ApiRead } from '../api.js';
import { href, type PageRequest } from '../context.js';
import { count, timeCell } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, numHead, page, tableHead } from '../layout.js';
import { idAfter, PAGE_SIZE } from '../reads.js';
import { duration } from '../text.js';

/** The job type of a flow job (`FLOW_TYPE` of `@jobs/core`'s engine). */
export const FLOW_TYPE = '$flow';
/** The `Job.meta` header naming a flow node's flow. */
export const FLOW_META = 'jobs.flow';

/** How many of a flow's nodes are where, from the flow job's record alone. */
export interface FlowCounts {
  nodes: number;
  /** Not started yet. */
  pending: number;
  /** Started, not ended as far as the flow job knows (waiting or running). */
  started: number;
  completed: number;
  deadletter: number;
  cancelled: number;
  skipped: number;
}

/** One flow of the list. */
export interface FlowRow {
  id: string;
  status: FlowStatus;
  counts: FlowCounts;
  createdAt: Date;
  /** When it ended; null while live. */
  finishedAt: Date | null;
}

type Outcome = 'completed' | 'deadletter' | 'cancelled' | 'skipped';
const OUTCOMES: readonly Outcome[] = ['completed', 'deadletter', 'cancelled', 'skipped'];

/**
 * A flow's node counts from its flow job: a finished one's result (`FlowSummary`) names every
 * node's outcome; a live one's checkpoints say which nodes started (`node:<name>`, with the
 * outcome once it is known) and how the others ended (`end:<name>`).
 */
export function flowCounts(record: Job | JobHistoryRecord): FlowCounts {
  const names = ((record.payload as { nodes?: { name: string }[] } | null)?.nodes ?? []).map(
    (node) => node.name,
  );
  const counts: FlowCounts = {
    nodes: names.length,
    pending: 0,
    started: 0,
    completed: 0,
    deadletter: 0,
    cancelled: 0,
    skipped: 0,
  };
  const summary =
    record.state === 'finished'
      ? (record.result as { nodes?: Record<string, string> } | null)?.nodes
      : undefined;
  const steps = new Map((record.steps ?? []).map((step) => [step.name, step.result]));
  for (const name of names) {
    const ended = summary?.[name] ?? (steps.get(`end:${name}`) as { outcome?: string })?.outcome;
    const started = steps.get(`node:${name}`) as { $child?: unknown; outcome?: string } | undefined;
    const outcome = (ended ?? started?.outcome) as Outcome | undefined;
    if (outcome && OUTCOMES.includes(outcome)) counts[outcome] += 1;
    else if (typeof started?.$child === 'string') counts.started += 1;
    else if (record.state === 'finished') counts.skipped += 1;
    else counts.pending += 1;
  }
  return counts;
}

function statusOf(record: Job | JobHistoryRecord): FlowStatus {
  if (record.state !== 'finished') return record.state === 'deadletter' ? 'failed' : 'running';
  if (record.outcome === 'cancelled') return 'cancelled';
  if (record.outcome !== 'completed') return 'failed';
  return (record.result as { status?: string } | null)?.status === 'completed'
    ? 'completed'
    : 'failed';
}

function rowOf(record: Job | JobHistoryRecord): FlowRow {
  return {
    id: record.id,
    status: statusOf(record),
    counts: flowCounts(record),
    createdAt: record.createdAt,
    finishedAt: record.state === 'finished' ? record.finishedAt : null,
  };
}

export interface FlowsRead {
  live: FlowRow[];
  /** The `after` of the next page of live flows; null on the last. */
  nextLive: string | null;
  /** Null when the store keeps no history. */
  finished: FlowRow[] | null;
  /** The `cursor` of the next page of finished flows; null on the last. */
  nextFinished: string | null;
}

/** One page of live flows after `after`, and one of finished flows after `cursor`. */
export async function readFlows(ctx: PageRequest): Promise<FlowsRead> {
  const after = ctx.query.get('after') || null;
  const cursorText = ctx.query.get('cursor');
  const match = /^(\d{1,15})\.(.+)$/s.exec(cursorText ?? '');
  const cursor = match
    ? historyCursor({ finishedAt: new Date(Number(match[1])), id: match[2] as string })
    : null;
  const [liveJobs, history] = await Promise.all([
    ctx.admin.listJobs({
      type: FLOW_TYPE,
      limit: PAGE_SIZE + 1,
      ...(after ? { afterId: after } : {}),
    }),
    ctx.admin.keepsHistory
      ? ctx.admin.listHistory({ type: FLOW_TYPE, limit: PAGE_SIZE + 1, cursor })
      : Promise.resolve(null),
  ]);
  // A store without keyset paging answers from the start: no next page rather than a loop.
  const keyset = after === null || liveJobs.every((job) => idAfter(job.id, after));
  const live = keyset ? liveJobs.slice(0, PAGE_SIZE) : [];
  const lastLive = live[live.length - 1];
  const records = history?.records ?? [];
  const shown = records.slice(0, PAGE_SIZE);
  const lastDone = shown[shown.length - 1];
  return {
    live: live.map(rowOf),
    nextLive: keyset && liveJobs.length > PAGE_SIZE && lastLive ? lastLive.id : null,
    finished: history ? shown.map(rowOf) : null,
    nextFinished:
      records.length > PAGE_SIZE && lastDone
        ? `${lastDone.finishedAt.getTime()}.${lastDone.id}`
        : null,
  };
}

const STATUS_BADGE: Record<FlowStatus, string> = {
  running: 'running',
  completed: 'completed',
  failed: 'bad',
  cancelled: 'cancelled',
};

/** `3 completed · 1 running · 2 pending`: the non-zero counts. */
function countsCell(c: FlowCounts): SafeHtml {
  const parts: [number, string, string][] = [
    [c.completed, 'completed', 'ok'],
    [c.started, 'started', 'running'],
    [c.pending, 'pending', 'neutral'],
    [c.deadletter, 'dead-lettered', 'bad'],
    [c.cancelled, 'cancelled', 'cancelled'],
    [c.skipped, 'skipped', 'neutral'],
  ];
  const shown = parts.filter(([n]) => n > 0);
  return html`<span class="small">${shown.map(
    ([n, word, kind], i) =>
      html`${i > 0 ? ' · ' : ''}<span class="flow-count ${kind}" data-count="${word}">${n} ${word}</span>`,
  )}</span>`;
}

const COLUMNS = tableHead([
  'Flow',
  'Status',
  numHead('Nodes'),
  'Nodes by outcome',
  'Created',
  'Age',
  'Graph',
]);

function flowRowHtml(ctx: PageRequest, row: FlowRow): SafeHtml {
  const link = href(ctx, `/jobs/${encodeURIComponent(row.id)}`);
  const end = row.finishedAt?.getTime() ?? ctx.now;
  return html`<tr data-flow="${row.id}"><td class="mono"><a href="${link}">${row.id}</a></td><td>${badge(STATUS_BADGE[row.status], row.status)}</td>
<td class="num">${row.counts.nodes}</td><td>${countsCell(row.counts)}</td><td>${timeCell(row.createdAt, ctx.now)}</td>
<td>${duration(end - row.createdAt.getTime())}${row.finishedAt ? html` <span class="muted small">(ran)</span>` : ''}</td>
<td><a href="${link}#flow-graph">graph</a></td></tr>`;
}

function table(ctx: PageRequest, rows: FlowRow[], empty: string): SafeHtml {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<table>${COLUMNS}<tbody>${rows.map((row) => flowRowHtml(ctx, row))}</tbody></table>`;
}

export async function flowsPage(ctx: PageRequest): Promise<SafeHtml> {
  const read = await readFlows(ctx);
  const cursor = ctx.query.get('cursor') || null;
  const after = ctx.query.get('after') || null;
  const first = (what: string, on: boolean, query: Record<string, string | null>): SafeHtml =>
    on
      ? html`<a href="${href(ctx, '/flows', query)}">« ${what}</a>`
      : html`<span class="off">« ${what}</span>`;
  const next = (
    word: string,
    value: string | null,
    query: Record<string, string | null>,
  ): SafeHtml =>
    value === null
      ? html`<span class="off">${word} »</span>`
      : html`<a rel="next" href="${href(ctx, '/flows', query)}">${word} »</a>`;
  const live = html`<div class="card" id="live-flows"><h2>Live <span class="muted small">oldest first</span></h2>
${table(ctx, read.live, 'No live flows.')}
<div class="pager"><span>${count(read.live.length)} shown</span><span class="links">${first('First', after !== null, { cursor })}
${next('Next', read.nextLive, { after: read.nextLive, cursor })}</span></div></div>`;
  const keeps = html`History keeps what the engine's <code>history</code> option says.`;
  const finished =
    read.finished === null
      ? html`<div class="card"><h2>Finished</h2><p class="muted">This store keeps no history.</p></div>`
      : html`<div class="card" id="finished-flows"><h2>Finished <span class="muted small">newest first</span></h2>
${read.finished.length === 0 ? html`<p class="muted">No finished flows recorded. ${keeps}</p>` : table(ctx, read.finished, '')}
<div class="pager"><span>${count(read.finished.length)} shown</span><span class="links">${first('Newest', cursor !== null, { after })}
${next('Older', read.nextFinished, { after, cursor: read.nextFinished })}</span></div></div>`;
  const intro = html`<p class="muted small">Flows and batches (<code>engine.flow</code>, <code>engine.batch</code>): each runs as a flow job; its page shows the flow as a graph. Counts come from the flow job's checkpoints: a started node is running or waiting.</p>`;
  return page(ctx, 'Flows', html`<h1>Flows</h1>${intro}${live}${finished}`);
}

/** `GET /api/flows?after=…&cursor=…`: a page of live flows and one of finished flows. */
export const apiFlows: ApiRead = async (ctx) => ({ status: 200, body: await readFlows(ctx) });

/** `GET /api/flows/<id>`: `admin.getFlow` — the flow's status and nodes. */
export const apiFlow: ApiRead = async (ctx, params) => {
  let flow = null;
  try {
    flow = await ctx.admin.getFlow(params.id as string);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
  }
  return flow ? { status: 200, body: flow } : { status: 404, body: { error: 'not found' } };
};
