/**
 * Job detail: payload as pretty JSON, a timeline, attempts, the last error with its stack,
 * progress and lease; actions retry, delete, cancel, suspend/activate (with confirmation).
 */
import { isWaitingState, type JobHistoryRecord } from '@jobs/core';
import { actionForm, type Ctx, href } from '../context.js';
import { clip, prettyJson, timeCell, utc } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { badge, page } from '../layout.js';
import { cancelOf, type ShownJob } from '../reads.js';
import { duration, scopeLimitOf, scopeLimitText } from '../text.js';

type Found = ShownJob | (JobHistoryRecord & { progress?: unknown; cancelRequested?: boolean });

interface Step {
  at: Date | null;
  text: SafeHtml | string;
  kind?: 'ok' | 'bad';
}

function timeline(job: Found, now: number): SafeHtml {
  const steps: Step[] = [{ at: job.createdAt, text: 'created' }];
  if (job.occurrence)
    steps.push({
      at: job.occurrence,
      text: html`occurrence of schedule <span class="mono">${job.schedule ?? ''}</span>`,
    });
  if (job.state === 'finished') {
    if (job.durationMs !== null) {
      steps.push({
        at: new Date(job.finishedAt.getTime() - job.durationMs),
        text: `attempt ${job.attempts} started`,
      });
    }
    if (job.lastError)
      steps.push({
        at: null,
        text: html`failed: <span class="err">${job.lastError.message}</span>`,
        kind: 'bad',
      });
    steps.push({
      at: job.finishedAt,
      text: html`finished: ${badge(job.outcome)}${job.durationMs === null ? '' : ` after ${duration(job.durationMs)}`}`,
      kind: job.outcome === 'completed' ? 'ok' : 'bad',
    });
  } else {
    if (job.attempts > 0 && job.lastError) {
      steps.push({
        at: null,
        text: html`attempt ${job.attempts} failed: <span class="err">${job.lastError.message}</span>`,
        kind: 'bad',
      });
    }
    const dueText =
      job.state === 'running'
        ? html`running attempt ${job.attempts} (lease until ${timeCell(job.lockExpiresAt, now)})`
        : job.state === 'deadletter'
          ? 'moved to the dead-letter area'
          : job.state === 'suspended'
            ? html`suspended (returns to ${job.suspendedFrom ?? 'async'} on activate)`
            : job.state === 'blocked'
              ? html`due, blocked: its scope is full (${scopeLimitText(job) ?? 'limited'}); starts when a slot frees`
              : job.dueAt.getTime() > now
                ? 'waiting for its due time'
                : 'due, waiting for an executor';
    steps.push({
      at: isWaitingState(job.state) ? job.dueAt : null,
      text: dueText,
      kind: job.state === 'deadletter' ? 'bad' : undefined,
    });
  }
  return html`<ol class="timeline">${steps.map(
    (s) =>
      html`<li class="${s.kind ?? ''}"><div>${s.text}</div>${s.at ? html`<div class="muted small">${timeCell(s.at, now)} · ${utc(s.at)}</div>` : ''}</li>`,
  )}</ol>`;
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

function actions(ctx: Ctx, job: ShownJob): SafeHtml {
  if (!ctx.canAct)
    return html`<p class="muted small">Read-only: actions need <code>authorize</code> (CLI: <code>--allow-actions</code>).</p>`;
  const path = `/jobs/${encodeURIComponent(job.id)}`;
  const target =
    job.scope !== null ? { by: 'scope', value: job.scope } : { by: 'type', value: job.type };
  const cancel = cancelOf(ctx.store);
  return html`<div class="actions">
${job.state === 'deadletter' ? actionForm(ctx, `${path}/retry`, 'Retry now', { kind: 'primary', confirm: `Retry job ${job.id} now?` }) : ''}
${cancel && !job.cancelRequested ? actionForm(ctx, `${path}/cancel`, 'Cancel', { kind: 'danger', confirm: `Cancel job ${job.id}? It will not be retried.` }) : ''}
${isWaitingState(job.state) ? actionForm(ctx, `${path}/suspend`, `Suspend ${target.by} ${clip(target.value, 40)}`, { confirm: `Suspend every waiting job of ${target.by} "${target.value}"?` }) : ''}
${job.state === 'suspended' ? actionForm(ctx, `${path}/activate`, `Activate ${target.by} ${clip(target.value, 40)}`, { confirm: `Activate every suspended job of ${target.by} "${target.value}"?` }) : ''}
${actionForm(ctx, `${path}/delete`, 'Delete', { kind: 'danger', confirm: `Delete job ${job.id}? This cannot be undone.` })}
</div>`;
}

export async function jobPage(ctx: Ctx, id: string): Promise<SafeHtml | null> {
  const live = (await ctx.store.getJob(id)) as ShownJob | null;
  const job: Found | null = live ?? (await ctx.store.getHistory?.(id)) ?? null;
  if (!job) return null;
  const state = job.state === 'finished' ? badge(job.outcome) : badge(job.state);
  const kv = (label: string, value: SafeHtml | string | number | null): SafeHtml =>
    html`<dt>${label}</dt><dd>${value === null || value === '' ? html`<span class="muted">—</span>` : value}</dd>`;
  const body = html`<h1>Job <span class="mono">${job.id}</span> ${state}${job.cancelRequested ? html` ${badge('bad', 'cancel requested')}` : ''}</h1>
${live ? actions(ctx, live) : html`<p class="muted">Finished: this is its history record.</p>`}
<div class="grid cols-2"><div class="card"><h2>Details</h2><dl class="kv">
${kv('Type', html`<a href="${href(ctx, '/jobs', { type: job.type })}">${job.type}</a>`)}
${kv('Queue', job.queue)}${kv('Priority', job.priority)}${kv('Scope', job.scope === null ? null : html`<span class="mono">${job.scope}</span>${scopeNote(job)}`)}
${kv('Key', job.key === null ? null : html`<span class="mono">${job.key}</span>`)}${kv('Tenant', job.tenantId)}
${kv('Attempts', job.attempts)}${kv('Retries left', job.retriesLeft)}
${kv('Due', html`${timeCell(job.dueAt, ctx.now)} <span class="muted small">${utc(job.dueAt)}</span>`)}
${kv('Created', html`${timeCell(job.createdAt, ctx.now)} <span class="muted small">${utc(job.createdAt)}</span>`)}
${kv('Lease owner', job.lockOwner === null ? null : html`<span class="mono">${job.lockOwner}</span>`)}
${kv('Lease expires', job.lockExpiresAt ? timeCell(job.lockExpiresAt, ctx.now) : null)}
${job.progress !== undefined && job.progress !== null ? kv('Progress', progressCell(job.progress)) : ''}
${job.schedule ? kv('Schedule', html`<span class="mono">${job.schedule}</span>${job.shard ? ` shard ${job.shard.index + 1}/${job.shard.count}` : ''}`) : ''}
${job.state === 'finished' ? kv('Duration', job.durationMs === null ? null : duration(job.durationMs)) : ''}
</dl></div><div class="card"><h2>Timeline</h2>${timeline(job, ctx.now)}</div></div>
<div class="card"><h2>Payload</h2><pre class="payload">${prettyJson(job.payload)}</pre></div>
${job.state === 'finished' && job.result !== null && job.result !== undefined ? html`<div class="card"><h2>Result</h2><pre>${prettyJson(job.result)}</pre></div>` : ''}
${job.lastError ? html`<div class="card"><h2>Last error</h2><p class="err">${job.lastError.message}</p>${job.lastError.stack ? html`<pre>${job.lastError.stack}</pre>` : ''}</div>` : ''}
${job.meta ? html`<div class="card"><h2>Meta</h2><pre>${prettyJson(job.meta)}</pre></div>` : ''}`;
  return page(ctx, `Job ${job.id}`, body);
}
