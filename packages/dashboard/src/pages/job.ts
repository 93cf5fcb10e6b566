/**
 * Job detail: payload as pretty JSON, a timeline, attempts, the last error with its stack,
 * progress and lease, what it waits for (`ctx.sleep`, `ctx.waitFor`), its log and its durable
 * steps (`ctx.step`), its child jobs (`ctx.run`) and, for a flow job or a flow node, the flow as a
 * graph (`graph.ts`); actions retry, delete, cancel, suspend/activate (with confirmation).
 */
import { isWaitingState, type Job, type JobHistoryRecord } from '@jobs/core';
import { actionForm, href, type PageRequest } from '../context.js';
import { clip, prettyJson, timeCell, utc } from '../format.js';
import { flowGraph } from '../graph.js';
import { html, type SafeHtml } from '../html.js';
import { badge, page } from '../layout.js';
import { findJob } from '../reads.js';
import {
  duration,
  type JobWait,
  jobWait,
  scopeLimitOf,
  scopeLimitText,
  shellWord,
} from '../text.js';
import { FLOW_META, FLOW_TYPE } from './flows.js';

/** The live job, or its history record once it finished. */
type Found = Job | JobHistoryRecord;

interface Step {
  at: Date | null;
  text: SafeHtml | string;
  kind?: 'ok' | 'bad';
}

/** What a live job is doing now: the last step of its timeline. */
function nowText(job: Job, now: number): SafeHtml | string {
  const lease = html`lease until ${timeCell(job.lockExpiresAt, now)}`;
  switch (job.state) {
    case 'running': {
      if (job.startedAt === null) {
        return html`acquired for attempt ${job.attempts}, not started yet (prefetched by its owner; ${lease})`;
      }
      // `undefined`: a store without start marks.
      const since = job.startedAt ? html` since ${timeCell(job.startedAt, now)}` : '';
      return html`running attempt ${job.attempts}${since} (${lease})`;
    }
    case 'deadletter':
      return 'moved to the dead-letter area';
    case 'suspended':
      return html`suspended (returns to ${job.suspendedFrom ?? 'async'} on activate)`;
    case 'blocked': {
      const limit = scopeLimitText(job) ?? 'limited';
      return html`due, blocked: its scope is full (${limit}); starts when a slot frees`;
    }
    default: {
      const wait = jobWait(job, now);
      if (wait) return waitText(wait);
      return job.dueAt.getTime() > now
        ? 'waiting for its due time'
        : 'due, waiting for an executor';
    }
  }
}

/** The timeline's last line: `sleeping (ctx.sleep cool-off) until its wake time` / `waiting for signal approval (…) or its timeout`. */
function waitText(wait: JobWait): SafeHtml {
  const step = html`<span class="mono">${wait.step}</span>`;
  if (wait.kind === 'sleep')
    return html`sleeping (<code>ctx.sleep</code> ${step}) until its wake time`;
  const signal = html`<span class="mono">${wait.signal}</span>`;
  return html`waiting for signal ${signal} (<code>ctx.waitFor</code> ${step}) or its timeout`;
}

/** What a parked job waits for and until when, and how to send the signal it waits for. */
function waitCard(job: Found, now: number): SafeHtml | string {
  const wait = jobWait(job, now);
  if (!wait) return '';
  const until = html`${timeCell(wait.until, now)} <span class="muted small">${utc(wait.until)}</span>`;
  const free = html`<p class="muted small">It holds no worker, lease, connection or scope slot meanwhile.</p>`;
  if (wait.kind === 'sleep') {
    return card(
      'Sleeping',
      html`<dl class="kv">${kv('Sleep', html`<span class="mono">${wait.step}</span>`)}${kv('Wakes', until)}</dl>${free}`,
    );
  }
  const key = wait.key === null ? '<key>' : shellWord(wait.key);
  const send = html`<p class="small">Send it: <code>jobsctl signal ${shellWord(wait.signal)} --key ${key} --payload '…'</code> or <code>engine.signal(…)</code> with the key the job waits for.</p>`;
  const keyRow = wait.key === null ? '' : kv('Key', html`<span class="mono">${wait.key}</span>`);
  return card(
    'Waiting for a signal',
    html`<dl class="kv">${kv('Signal', html`<span class="mono">${wait.signal}</span>`)}${keyRow}${kv('Times out', until)}</dl>${free}${send}`,
  );
}

function timeline(job: Found, now: number): SafeHtml {
  const steps: Step[] = [{ at: job.createdAt, text: 'created' }];
  if (job.occurrence) {
    const schedule = html`<span class="mono">${job.schedule ?? ''}</span>`;
    steps.push({ at: job.occurrence, text: html`occurrence of schedule ${schedule}` });
  }
  const failed = (prefix: string): Step | null =>
    job.lastError
      ? {
          at: null,
          text: html`${prefix}: <span class="err">${job.lastError.message}</span>`,
          kind: 'bad',
        }
      : null;
  if (job.state === 'finished') {
    if (job.durationMs !== null) {
      const started = new Date(job.finishedAt.getTime() - job.durationMs);
      steps.push({ at: started, text: `attempt ${job.attempts} started` });
    }
    const failure = failed('failed');
    if (failure) steps.push(failure);
    const after = job.durationMs === null ? '' : ` after ${duration(job.durationMs)}`;
    steps.push({
      at: job.finishedAt,
      text: html`finished: ${badge(job.outcome)}${after}`,
      kind: job.outcome === 'completed' ? 'ok' : 'bad',
    });
  } else {
    const failure = job.attempts > 0 ? failed(`attempt ${job.attempts} failed`) : null;
    if (failure) steps.push(failure);
    steps.push({
      at: isWaitingState(job.state) ? job.dueAt : null,
      text: nowText(job, now),
      kind: job.state === 'deadletter' ? 'bad' : undefined,
    });
  }
  return html`<ol class="timeline">${steps.map((step) => stepItem(step, now))}</ol>`;
}

function stepItem(step: Step, now: number): SafeHtml {
  const at = step.at
    ? html`<div class="muted small">${timeCell(step.at, now)} · ${utc(step.at)}</div>`
    : '';
  return html`<li class="${step.kind ?? ''}"><div>${step.text}</div>${at}</li>`;
}

function progressCell(progress: unknown): SafeHtml {
  if (typeof progress === 'number' && progress >= 0 && progress <= 1) {
    return html`<progress max="1" value="${progress}"></progress> ${Math.round(progress * 100)}%`;
  }
  if (typeof progress === 'number' && progress >= 0 && progress <= 100) {
    return html`<progress max="100" value="${progress}"></progress> ${progress}%`;
  }
  const part = progress as { done?: unknown; total?: unknown } | null;
  if (typeof part?.done === 'number' && typeof part.total === 'number' && part.total > 0) {
    return html`<progress max="${part.total}" value="${Math.min(part.done, part.total)}"></progress> ${part.done} / ${part.total}`;
  }
  return html`<code>${prettyJson(progress)}</code>`;
}

/** ` (limit 2)` / ` (exclusive)` after a scope, saying in its title what the limit means. */
function scopeNote(job: Found): SafeHtml | string {
  const limit = scopeLimitOf(job);
  if (limit === null) return '';
  const means =
    limit === 1
      ? 'one job of this scope runs at a time'
      : `at most ${limit} jobs of this scope run at once`;
  return html` <span class="scope-limit" title="${means}">(${scopeLimitText(job)})</span>`;
}

/** Retry, for a dead-letter job. */
function retryForm(ctx: PageRequest, job: Job, path: string): SafeHtml | string {
  if (job.state !== 'deadletter') return '';
  const confirm = `Retry job ${job.id} now?`;
  return actionForm(ctx, `${path}/retry`, 'Retry now', { kind: 'primary', confirm });
}

/** Cancel, when the store can and nobody asked yet. */
function cancelForm(ctx: PageRequest, job: Job, path: string): SafeHtml | string {
  if (!ctx.admin.canCancel || job.cancelRequested) return '';
  const confirm = `Cancel job ${job.id}? It will not be retried.`;
  return actionForm(ctx, `${path}/cancel`, 'Cancel', { kind: 'danger', confirm });
}

/** Suspend a waiting job, activate a suspended one: with its scope, else its type. */
function suspendForm(ctx: PageRequest, job: Job, path: string): SafeHtml | string {
  const [by, value] = job.scope !== null ? ['scope', job.scope] : ['type', job.type];
  const name = `${by} ${clip(value, 40)}`;
  if (isWaitingState(job.state)) {
    const confirm = `Suspend every waiting job of ${by} "${value}"?`;
    return actionForm(ctx, `${path}/suspend`, `Suspend ${name}`, { confirm });
  }
  if (job.state !== 'suspended') return '';
  const confirm = `Activate every suspended job of ${by} "${value}"?`;
  return actionForm(ctx, `${path}/activate`, `Activate ${name}`, { confirm });
}

/**
 * Delete. A running job is not deleted under its worker: the store is asked to cancel it, and it
 * is removed when its worker stops it — which the confirmation says. Without cancellation a
 * running job has no Delete button (the action would be refused).
 */
function deleteForm(ctx: PageRequest, job: Job, path: string): SafeHtml | string {
  if (job.state !== 'running') {
    const confirm = `Delete job ${job.id}? This cannot be undone.`;
    return actionForm(ctx, `${path}/delete`, 'Delete', { kind: 'danger', confirm });
  }
  if (!ctx.admin.canCancel) return '';
  const confirm =
    `Job ${job.id} is running. Delete it? Its worker is told to stop it, and it is removed ` +
    'when the worker lets go. This cannot be undone.';
  return actionForm(ctx, `${path}/delete`, 'Delete', { kind: 'danger', confirm });
}

function actions(ctx: PageRequest, job: Job): SafeHtml {
  if (!ctx.canAct) {
    const cli = html`(CLI: <code>--allow-actions</code>)`;
    return html`<p class="muted small">Read-only: actions need <code>authorize</code> ${cli}.</p>`;
  }
  const path = `/jobs/${encodeURIComponent(job.id)}`;
  return html`<div class="actions">
${retryForm(ctx, job, path)}
${cancelForm(ctx, job, path)}
${suspendForm(ctx, job, path)}
${deleteForm(ctx, job, path)}
</div>`;
}

/** One row of the details list; an absent value shows a dash. */
function kv(label: string, value: SafeHtml | string | number | null): SafeHtml {
  const shown = value === null || value === '' ? html`<span class="muted">—</span>` : value;
  return html`<dt>${label}</dt><dd>${shown}</dd>\n`;
}

/** The details card's rows: always the first ones, the others when they apply. */
function details(ctx: PageRequest, job: Found): SafeHtml[] {
  const at = (time: Date): SafeHtml =>
    html`${timeCell(time, ctx.now)} <span class="muted small">${utc(time)}</span>`;
  const mono = (text: string | null): SafeHtml | null =>
    text === null ? null : html`<span class="mono">${text}</span>`;
  const rows = [
    kv('Type', html`<a href="${href(ctx, '/jobs', { type: job.type })}">${job.type}</a>`),
    kv('Queue', job.queue),
    kv('Priority', job.priority),
    kv('Scope', job.scope === null ? null : html`${mono(job.scope)}${scopeNote(job)}`),
    kv('Key', mono(job.key)),
    kv('Tenant', job.tenantId),
    kv('Attempts', job.attempts),
    kv('Retries left', job.retriesLeft),
    kv('Due', at(job.dueAt)),
    kv('Created', at(job.createdAt)),
    kv('Lease owner', mono(job.lockOwner)),
    kv('Lease expires', job.lockExpiresAt ? timeCell(job.lockExpiresAt, ctx.now) : null),
  ];
  if (job.timeoutMs) rows.push(kv('Time limit', duration(job.timeoutMs)));
  if (job.state === 'running' && job.startedAt !== undefined) {
    const prefetched = html`<span class="muted">not yet: acquired, waiting in its owner's prefetch</span>`;
    rows.push(kv('Started', job.startedAt ? timeCell(job.startedAt, ctx.now) : prefetched));
  }
  if (job.state === 'finished' && job.startedAt) {
    rows.push(kv('Last run started', timeCell(job.startedAt, ctx.now)));
  }
  if (job.progress !== undefined && job.progress !== null) {
    rows.push(kv('Progress', progressCell(job.progress)));
  }
  if (job.schedule) {
    const shard = job.shard ? ` shard ${job.shard.index + 1}/${job.shard.count}` : '';
    rows.push(kv('Schedule', html`${mono(job.schedule)}${shard}`));
  }
  if (job.state === 'finished') {
    rows.push(kv('Duration', job.durationMs === null ? null : duration(job.durationMs)));
  }
  return rows;
}

function card(title: SafeHtml | string, body: SafeHtml): SafeHtml {
  return html`<div class="card"><h2>${title}</h2>${body}</div>\n`;
}

/** Payload, and the result, log, steps, last error and meta when there are any: a card each. */
function contentCards(job: Found): SafeHtml[] {
  const cards = [card('Payload', html`<pre class="payload">${prettyJson(job.payload)}</pre>`)];
  if (job.state === 'finished' && job.result !== null && job.result !== undefined) {
    cards.push(card('Result', html`<pre>${prettyJson(job.result)}</pre>`));
  }
  if (job.logs && job.logs.length > 0) {
    const n = job.logs.length;
    const lines = job.logs.map((line) => `${line.at.toISOString()}  ${line.message}`).join('\n');
    const title = html`Log <span class="muted small">${n} line${n === 1 ? '' : 's'}</span>`;
    cards.push(card(title, html`<pre class="log">${lines}</pre>`));
  }
  if (job.steps && job.steps.length > 0) {
    const n = job.steps.length;
    const rows = job.steps.map(
      (step) =>
        html`<tr><td class="mono">${step.name}</td><td>${utc(step.at)}</td><td>${duration(step.durationMs)}</td><td><code>${clip(JSON.stringify(step.result) ?? 'null', 200)}</code></td></tr>`,
    );
    const title = html`Steps <span class="muted small">${n} done</span>`;
    cards.push(
      card(
        title,
        html`<table><thead><tr><th>Name</th><th>Finished</th><th>Took</th><th>Result</th></tr></thead><tbody>${rows}</tbody></table>`,
      ),
    );
  }
  if (job.lastError) {
    const { message, stack } = job.lastError;
    const trace = stack ? html`<pre>${stack}</pre>` : '';
    cards.push(card('Last error', html`<p class="err">${message}</p>${trace}`));
  }
  if (job.meta) cards.push(card('Meta', html`<pre>${prettyJson(job.meta)}</pre>`));
  return cards;
}

/** Children read per page at most (one read each, by id); the rest are listed by id only. */
export const CHILDREN_READ = 100;

interface ChildCheckpoint {
  step: string;
  id: string;
  /** The outcome the parent checkpointed, once it took it. */
  outcome?: string;
}

/** The child jobs a parent started with `ctx.run`, from its checkpoints (`{ $child: id, … }`). */
export function childCheckpoints(job: Found): ChildCheckpoint[] {
  const out: ChildCheckpoint[] = [];
  for (const step of job.steps ?? []) {
    const result = step.result as { $child?: unknown; outcome?: unknown } | null;
    if (typeof result !== 'object' || result === null || typeof result.$child !== 'string')
      continue;
    const child: ChildCheckpoint = { step: step.name, id: result.$child };
    if (typeof result.outcome === 'string') child.outcome = result.outcome;
    out.push(child);
  }
  return out;
}

/** The children card: each child's step name, id (linked), type and state or outcome. */
async function childrenCard(ctx: PageRequest, job: Found): Promise<SafeHtml | string> {
  // A flow job's children are its nodes: its graph shows them.
  if (job.type === FLOW_TYPE) return '';
  const children = childCheckpoints(job);
  if (children.length === 0) return '';
  const found = await Promise.all(
    children.slice(0, CHILDREN_READ).map((child) => findJob(ctx.admin, child.id)),
  );
  const rows = children.map((child, i) => {
    const record = found[i] ?? null;
    const link = html`<a href="${href(ctx, `/jobs/${encodeURIComponent(child.id)}`)}">${child.id}</a>`;
    const now =
      record === null ? null : record.state === 'finished' ? record.outcome : record.state;
    const state = child.outcome ?? now;
    const shown =
      state === null
        ? html`<span class="muted">${i < CHILDREN_READ ? 'gone' : 'not read'}</span>`
        : badge(state);
    return html`<tr data-child="${child.id}"><td class="mono">${child.step}</td><td class="mono">${link}</td><td>${record?.type ?? ''}</td><td>${shown}</td></tr>`;
  });
  const n = children.length;
  const done = children.filter((child) => child.outcome !== undefined).length;
  const title = html`Children <span class="muted small">${n} started with <code>ctx.run</code>, ${done} taken</span>`;
  return card(
    title,
    html`<table><thead><tr><th>Step</th><th>Child</th><th>Type</th><th>State</th></tr></thead><tbody>${rows}</tbody></table>`,
  );
}

/** The flow this job is (a flow job) or belongs to (a flow node), as a graph. */
async function flowCard(ctx: PageRequest, job: Found): Promise<SafeHtml | string> {
  const flowId = job.type === FLOW_TYPE ? job.id : (job.meta?.[FLOW_META] ?? null);
  if (flowId === null) return '';
  const flow = await ctx.admin.getFlow(flowId);
  if (flow === null) return '';
  const own = flowId === job.id;
  const link = html`<a class="mono" href="${href(ctx, `/jobs/${encodeURIComponent(flowId)}`)}">${flowId}</a>`;
  const title = own
    ? html`Flow <span class="muted small">${flow.nodes.length} nodes</span> ${badge(flow.status === 'failed' ? 'bad' : flow.status, flow.status)}`
    : html`Flow ${link} <span class="muted small">this job is a node of it</span> ${badge(flow.status === 'failed' ? 'bad' : flow.status, flow.status)}`;
  return html`<div class="card" id="flow-graph"><h2>${title}</h2><div class="graph-wrap">${flowGraph(ctx, flow, own ? null : job.id)}</div></div>\n`;
}

export async function jobPage(ctx: PageRequest, id: string): Promise<SafeHtml | null> {
  const job: Found | null = await findJob(ctx.admin, id);
  if (!job) return null;
  const live = job.state === 'finished' ? null : job;
  const [flow, children] = await Promise.all([flowCard(ctx, job), childrenCard(ctx, job)]);
  const state = job.state === 'finished' ? badge(job.outcome) : badge(job.state);
  const flag = job.cancelRequested ? html` ${badge('bad', 'cancel requested')}` : '';
  const finished = html`<p class="muted">Finished: this is its history record.</p>`;
  const body = html`<h1>Job <span class="mono">${job.id}</span> ${state}${flag}</h1>
${live ? actions(ctx, live) : finished}
<div class="grid cols-2"><div class="card"><h2>Details</h2><dl class="kv">
${details(ctx, job)}</dl></div><div class="card"><h2>Timeline</h2>${timeline(job, ctx.now)}</div></div>
${waitCard(job, ctx.now)}${flow}${children}${contentCards(job)}`;
  return page(ctx, `Job ${job.id}`, body);
}
