/**
 * What the dashboard's forms do (POST only; the caller has checked authorization, origin and
 * the CSRF token). Each ends in a redirect (post/redirect/get), except a bulk dry run, which
 * renders how many jobs the action would touch and the form that does it.
 */
import { DEFAULT_RETRIES, type JobFilter } from '@jobs/core';
import { actionForm, type Ctx, href, safeDecode } from './context.js';
import { count } from './format.js';
import { html, type SafeHtml } from './html.js';
import { deadletterPage } from './pages/deadletter.js';
import { BULK_BATCH, BULK_SCAN_CAP, cancelOf, scanJobs } from './reads.js';

export type ActionResult = { redirect: string } | { page: SafeHtml } | null;

async function jobAction(ctx: Ctx, id: string, verb: string): Promise<ActionResult> {
  const job = await ctx.store.getJob(id);
  const back = `/jobs/${encodeURIComponent(id)}`;
  if (!job) return verb === 'delete' ? { redirect: href(ctx, '/jobs') } : null;
  switch (verb) {
    case 'retry': {
      const retried = await ctx.store.retryDeadletter(id, DEFAULT_RETRIES);
      return { redirect: href(ctx, back, { done: retried ? 'retried' : null, n: 1 }) };
    }
    case 'delete': {
      await ctx.store.deleteJob(id);
      return { redirect: href(ctx, '/jobs', { done: 'deleted', n: 1 }) };
    }
    case 'cancel': {
      const cancel = cancelOf(ctx.store);
      if (!cancel) return null;
      // `cancelled`: deleted (its history record, if kept, is at the same address);
      // `requested`: running, its owner learns it at the next lease renewal.
      const outcome = await cancel(id);
      return {
        redirect: href(ctx, back, {
          done: outcome === 'requested' ? 'cancel-requested' : 'cancelled',
        }),
      };
    }
    case 'suspend':
    case 'activate': {
      // The contract suspends by filter: the job's scope when it has one, else its type.
      const filter: JobFilter = job.scope !== null ? { scope: job.scope } : { type: job.type };
      const n =
        verb === 'suspend' ? await ctx.store.suspend(filter) : await ctx.store.activate(filter);
      return {
        redirect: href(ctx, back, { done: verb === 'suspend' ? 'suspended' : 'activated', n }),
      };
    }
    default:
      return null;
  }
}

/** Dead-letter jobs a bulk form selects: by type, and by exact error message when given. */
interface BulkSelection {
  type: string;
  /** null: every error message. */
  message: string | null;
}

async function selectedIds(
  ctx: Ctx,
  selection: BulkSelection,
): Promise<{ ids: string[]; truncated: boolean }> {
  const filter: JobFilter = {
    state: 'deadletter',
    ...(selection.type ? { type: selection.type } : {}),
  };
  const { jobs, truncated } = await scanJobs(ctx.store, filter, BULK_SCAN_CAP, (job) =>
    selection.message === null ? true : (job.lastError?.message ?? '') === selection.message,
  );
  return { ids: jobs.map((job) => job.id), truncated };
}

/** How many jobs the bulk action would touch. */
async function dryRunCount(
  ctx: Ctx,
  selection: BulkSelection,
): Promise<{ n: number; capped: boolean }> {
  if (selection.message === null && ctx.store.countJobs) {
    const n = await ctx.store.countJobs({
      state: 'deadletter',
      ...(selection.type ? { type: selection.type } : {}),
    });
    return { n, capped: false };
  }
  const { ids, truncated } = await selectedIds(ctx, selection);
  return { n: ids.length, capped: truncated };
}

async function runBulk(
  ctx: Ctx,
  op: 'retry' | 'delete',
  selection: BulkSelection,
): Promise<number> {
  const filter: JobFilter = {
    state: 'deadletter',
    ...(selection.type ? { type: selection.type } : {}),
  };
  const store = ctx.store;
  // A whole type: the store's batched bulk calls when it has them.
  if (selection.message === null && op === 'retry' && store.retryDeadletterMany) {
    let total = 0;
    for (;;) {
      const n = await store.retryDeadletterMany(filter, DEFAULT_RETRIES, BULK_BATCH);
      total += n;
      if (n < BULK_BATCH) return total;
    }
  }
  if (selection.message === null && op === 'delete' && store.deleteMany) {
    let total = 0;
    for (;;) {
      const n = await store.deleteMany(filter, BULK_BATCH);
      total += n;
      if (n < BULK_BATCH) return total;
    }
  }
  const { ids } = await selectedIds(ctx, selection);
  let done = 0;
  for (const id of ids) {
    const ok =
      op === 'retry'
        ? (await store.retryDeadletter(id, DEFAULT_RETRIES)) !== null
        : await store.deleteJob(id);
    if (ok) done += 1;
  }
  return done;
}

async function bulkAction(ctx: Ctx, form: URLSearchParams): Promise<ActionResult> {
  const op = form.get('op');
  if (op !== 'retry' && op !== 'delete') return null;
  const selection: BulkSelection = {
    type: (form.get('type') ?? '').trim(),
    message: form.has('message') ? (form.get('message') ?? '') : null,
  };
  if (form.get('dryRun') === '1') {
    const { n, capped } = await dryRunCount(ctx, selection);
    const what = html`dead-letter job(s)${selection.type ? html` of type <strong>${selection.type}</strong>` : ''}${selection.message !== null ? html` with error <code>${selection.message || '(none)'}</code>` : ''}`;
    const fields: Record<string, string> = { op, type: selection.type, dryRun: '0' };
    if (selection.message !== null) fields.message = selection.message;
    const notice = html`<div class="notice warn" role="status" id="dry-run"><p><strong>Dry run:</strong> ${op} would touch <strong class="dry-run-count">${capped ? `${count(n)}+` : count(n)}</strong> ${what}.${capped ? html` One request handles at most ${count(BULK_SCAN_CAP)}.` : ''}</p>
${n === 0 ? html`<p class="muted">Nothing to do.</p>` : html`<div class="actions">${actionForm(ctx, '/deadletter/bulk', `${op === 'retry' ? 'Retry' : 'Delete'} ${capped ? `${count(n)}+` : count(n)} job(s) now`, { fields, kind: op === 'delete' ? 'danger' : 'primary', confirm: `${op} ${count(n)} dead-letter job(s)?` })}<a href="${href(ctx, '/deadletter')}">Cancel</a></div>`}</div>`;
    return { page: await deadletterPage(ctx, notice) };
  }
  const n = await runBulk(ctx, op, selection);
  return {
    redirect: href(ctx, '/deadletter', { done: op === 'retry' ? 'retried' : 'deleted', n }),
  };
}

async function scheduleAction(ctx: Ctx, name: string, verb: string): Promise<ActionResult> {
  if (verb !== 'pause' && verb !== 'resume') return null;
  const record = await ctx.store.setSchedulePaused(name, verb === 'pause');
  if (!record) return null;
  return { redirect: href(ctx, '/schedules', { done: verb === 'pause' ? 'paused' : 'resumed' }) };
}

/** Runs the action at `path`; null when there is none (404). */
export async function runAction(ctx: Ctx, form: URLSearchParams): Promise<ActionResult> {
  const job = /^\/jobs\/([^/]+)\/(retry|delete|cancel|suspend|activate)$/.exec(ctx.path);
  if (job) return jobAction(ctx, safeDecode(job[1] as string), job[2] as string);
  if (ctx.path === '/deadletter/bulk') return bulkAction(ctx, form);
  const schedule = /^\/schedules\/([^/]+)\/(pause|resume)$/.exec(ctx.path);
  if (schedule)
    return scheduleAction(ctx, safeDecode(schedule[1] as string), schedule[2] as string);
  return null;
}
