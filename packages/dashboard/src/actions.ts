/**
 * What the dashboard's forms do (POST only; the caller has checked authorization, origin and
 * the CSRF token). Every change goes through the admin API of `@jobs/core` (`ctx.admin`), as
 * `jobsctl` does: its defaults (fresh retries) and its bulk batching are written there once.
 * Only the selection of dead-letter jobs by error message is the dashboard's own.
 *
 * Each action ends in a redirect (post/redirect/get), except a bulk dry run, which renders how
 * many jobs the action would touch and the form that does it.
 */
import {
  type CancelOutcome,
  InvalidStateError,
  type Job,
  type JobAdmin,
  type JobFilter,
  NotFoundError,
} from '@jobs/core';
import { actionForm, href, type PageRequest, type RouteParams } from './context.js';
import { count } from './format.js';
import { html, type SafeHtml } from './html.js';
import { deadletterPage } from './pages/deadletter.js';
import { BULK_SCAN_CAP, liveJob, scanJobs } from './reads.js';

export type ActionResult =
  | { redirect: string }
  | { page: SafeHtml }
  | { refuse: { status: number; title: string; message: string } }
  | null;

/** What a POST route runs; null answers 404 (no such action, job or schedule). */
export type Action = (
  ctx: PageRequest,
  params: RouteParams,
  form: URLSearchParams,
) => Promise<ActionResult>;

const jobPath = (id: string): string => `/jobs/${encodeURIComponent(id)}`;

/**
 * An action on job `:id`, read first. A job that no longer exists gets `gone` (by default 404).
 * Read through the admin API: an id no job has (a blank one included) names nothing, no error.
 */
function onJob(
  act: (ctx: PageRequest, job: Job) => Promise<ActionResult>,
  gone: (ctx: PageRequest) => ActionResult = () => null,
): Action {
  return async (ctx, params) => {
    const job = await liveJob(ctx.admin, params.id as string);
    return job ? act(ctx, job) : gone(ctx);
  };
}

/** `admin.retry`; false when the job left the dead-letter area (or the table) meanwhile. */
async function retried(admin: JobAdmin, id: string): Promise<boolean> {
  try {
    await admin.retry(id);
    return true;
  } catch (error) {
    if (error instanceof InvalidStateError || error instanceof NotFoundError) return false;
    throw error;
  }
}

/** `admin.cancel`, a job gone meanwhile answered as `not-found` rather than thrown. */
async function cancelled(admin: JobAdmin, id: string): Promise<CancelOutcome> {
  try {
    return await admin.cancel(id);
  } catch (error) {
    if (error instanceof NotFoundError) return 'not-found';
    throw error;
  }
}

/** Retry: the dead-letter job is due again, with the admin API's fresh retries. */
export const retryJob = onJob(async (ctx, job) => {
  const done = (await retried(ctx.admin, job.id)) ? 'retried' : null;
  return { redirect: href(ctx, jobPath(job.id), { done, n: 1 }) };
});

/**
 * Delete. A running job is not deleted under its worker (its handler may still run, and a
 * limited job's scope slot must stay taken until its owner lets go): it gets a cancel request,
 * and the job ends `cancelled` when its worker stops it. A store that cannot cancel is refused
 * rather than asked to delete a job that runs.
 */
export const deleteJob = onJob(
  (ctx, job) => (job.state === 'running' ? deleteRunning(ctx, job) : deleteIdle(ctx, job)),
  (ctx) => ({ redirect: href(ctx, '/jobs') }),
);

const deleted = (ctx: PageRequest): ActionResult => ({
  redirect: href(ctx, '/jobs', { done: 'deleted', n: 1 }),
});
const deleteRequested = (ctx: PageRequest, job: Job): ActionResult => ({
  redirect: href(ctx, jobPath(job.id), { done: 'delete-requested' }),
});

async function deleteRunning(ctx: PageRequest, job: Job): Promise<ActionResult> {
  if (!ctx.admin.canCancel) {
    const message =
      `Job ${job.id} is running, and this store cannot cancel a running job (it has no ` +
      'capabilities.cancellation): deleting it now would free its scope slot while its worker ' +
      'still runs it. Wait until it finishes, or stop its worker.';
    return { refuse: { status: 409, title: 'Job is running', message } };
  }
  const outcome = await cancelled(ctx.admin, job.id);
  if (outcome === 'requested') return deleteRequested(ctx, job);
  // `cancelled`: it stopped running meanwhile and was removed at once.
  if (outcome === 'cancelled') return deleted(ctx);
  return { redirect: href(ctx, jobPath(job.id)) }; // finished meanwhile: its page shows its record
}

async function deleteIdle(ctx: PageRequest, job: Job): Promise<ActionResult> {
  await ctx.admin.deleteJob(job.id);
  // It may have started between the read and the delete: the store then flags it instead.
  const left = await liveJob(ctx.admin, job.id);
  return left?.state === 'running' ? deleteRequested(ctx, job) : deleted(ctx);
}

/**
 * Cancel. `cancelled`: deleted (its history record, if kept, is at the same address);
 * `requested`: running, its owner learns it at the next lease renewal. A job that finished
 * meanwhile was not cancelled: its page shows how it ended.
 */
export const cancelJob = onJob(async (ctx, job) => {
  if (!ctx.admin.canCancel) return null;
  const outcome = await cancelled(ctx.admin, job.id);
  const done =
    outcome === 'requested' ? 'cancel-requested' : outcome === 'cancelled' ? 'cancelled' : null;
  return { redirect: href(ctx, jobPath(job.id), { done }) };
});

/** Suspend or activate: by filter, as the contract does it — the job's scope, else its type. */
function byScopeOrType(verb: 'suspend' | 'activate'): Action {
  return onJob(async (ctx, job) => {
    const filter: JobFilter = job.scope !== null ? { scope: job.scope } : { type: job.type };
    const n =
      verb === 'suspend' ? await ctx.admin.suspend(filter) : await ctx.admin.activate(filter);
    const done = verb === 'suspend' ? 'suspended' : 'activated';
    return { redirect: href(ctx, jobPath(job.id), { done, n }) };
  });
}

export const suspendJobs = byScopeOrType('suspend');
export const activateJobs = byScopeOrType('activate');

/** Dead-letter jobs a bulk form selects: by type, and by exact error message when given. */
interface BulkSelection {
  op: 'retry' | 'delete';
  /** '': every type. */
  type: string;
  /** null: every error message. */
  message: string | null;
}

/** A whole type (no message): the admin API counts (`dryRun`) or acts, in its batches. */
function wholeSelection(
  ctx: PageRequest,
  selection: BulkSelection,
  dryRun: boolean,
): Promise<number> {
  const filter = { ...(selection.type ? { type: selection.type } : {}), dryRun };
  return selection.op === 'retry'
    ? ctx.admin.retryMany(filter)
    : ctx.admin.deleteMany({ ...filter, state: 'deadletter' });
}

/** The ids of a selection by message, at most `BULK_SCAN_CAP` (`truncated` says it was hit). */
async function selectedIds(
  ctx: PageRequest,
  selection: BulkSelection,
): Promise<{ ids: string[]; truncated: boolean }> {
  const filter: JobFilter = {
    state: 'deadletter',
    ...(selection.type ? { type: selection.type } : {}),
  };
  const { jobs, truncated } = await scanJobs(
    ctx.admin,
    filter,
    BULK_SCAN_CAP,
    (job) => (job.lastError?.message ?? '') === selection.message,
  );
  return { ids: jobs.map((job) => job.id), truncated };
}

/** How many jobs the bulk action would touch; `capped`: a selection by message hit its cap. */
async function dryRunCount(
  ctx: PageRequest,
  selection: BulkSelection,
): Promise<{ n: number; capped: boolean }> {
  if (selection.message === null) {
    return { n: await wholeSelection(ctx, selection, true), capped: false };
  }
  const { ids, truncated } = await selectedIds(ctx, selection);
  return { n: ids.length, capped: truncated };
}

/**
 * Runs a bulk action; `running` counts deleted jobs that had started meanwhile (a dead-letter
 * job retried and picked up between the selection and the delete) and so only got a cancel
 * request.
 */
async function runBulk(
  ctx: PageRequest,
  selection: BulkSelection,
): Promise<{ n: number; running: number }> {
  // A whole type: its delete filter names the dead-letter state, so a store's bulk delete
  // touches no running job.
  if (selection.message === null)
    return { n: await wholeSelection(ctx, selection, false), running: 0 };
  const { ids } = await selectedIds(ctx, selection);
  const done: string[] = [];
  for (const id of ids) {
    const ok =
      selection.op === 'retry' ? await retried(ctx.admin, id) : await ctx.admin.deleteJob(id);
    if (ok) done.push(id);
  }
  if (selection.op === 'retry' || done.length === 0) return { n: done.length, running: 0 };
  // One bounded read tells which of them are still there, running with a cancel request.
  const gone = new Set(done);
  const { jobs } = await scanJobs(
    ctx.admin,
    { state: 'running', ...(selection.type ? { type: selection.type } : {}) },
    BULK_SCAN_CAP,
    (job) => gone.has(job.id),
  );
  return { n: done.length, running: jobs.length };
}

/** What a dry run selected: `dead-letter job(s) of type X with error Y`. */
function selectionText(selection: BulkSelection): SafeHtml {
  const type = selection.type ? html` of type <strong>${selection.type}</strong>` : '';
  const message =
    selection.message === null
      ? ''
      : html` with error <code>${selection.message || '(none)'}</code>`;
  return html`dead-letter job(s)${type}${message}`;
}

/** The form that runs what the dry run counted, and a way out. */
function confirmForm(
  ctx: PageRequest,
  selection: BulkSelection,
  n: number,
  shown: string,
): SafeHtml {
  const fields: Record<string, string> = { op: selection.op, type: selection.type, dryRun: '0' };
  if (selection.message !== null) fields.message = selection.message;
  const label = `${selection.op === 'retry' ? 'Retry' : 'Delete'} ${shown} job(s) now`;
  const form = actionForm(ctx, '/deadletter/bulk', label, {
    fields,
    kind: selection.op === 'delete' ? 'danger' : 'primary',
    confirm: `${selection.op} ${count(n)} dead-letter job(s)?`,
  });
  return html`<div class="actions">${form}<a href="${href(ctx, '/deadletter')}">Cancel</a></div>`;
}

function dryRunNotice(
  ctx: PageRequest,
  selection: BulkSelection,
  n: number,
  capped: boolean,
): SafeHtml {
  const shown = capped ? `${count(n)}+` : count(n);
  const cap = capped ? html` One request handles at most ${count(BULK_SCAN_CAP)}.` : '';
  const next =
    n === 0 ? html`<p class="muted">Nothing to do.</p>` : confirmForm(ctx, selection, n, shown);
  const touched = html`<strong class="dry-run-count">${shown}</strong>`;
  const text = html`${selection.op} would touch ${touched} ${selectionText(selection)}.${cap}`;
  return html`<div class="notice warn" role="status" id="dry-run"><p><strong>Dry run:</strong> ${text}</p>
${next}</div>`;
}

/** Bulk retry or delete of dead-letter jobs: a dry run (`dryRun=1`) first, then the action. */
export const bulkAction: Action = async (ctx, _params, form) => {
  const op = form.get('op');
  if (op !== 'retry' && op !== 'delete') return null;
  const selection: BulkSelection = {
    op,
    type: (form.get('type') ?? '').trim(),
    message: form.has('message') ? (form.get('message') ?? '') : null,
  };
  if (form.get('dryRun') === '1') {
    const { n, capped } = await dryRunCount(ctx, selection);
    return { page: await deadletterPage(ctx, dryRunNotice(ctx, selection, n, capped)) };
  }
  const { n, running } = await runBulk(ctx, selection);
  const done = op === 'retry' ? 'retried' : 'deleted';
  return { redirect: href(ctx, '/deadletter', { done, n, running: running > 0 ? running : null }) };
};

/** Pause or resume schedule `:name`. */
function setPaused(paused: boolean): Action {
  return async (ctx, params) => {
    const record = await ctx.admin.setSchedulePaused(params.name as string, paused);
    if (!record) return null;
    return { redirect: href(ctx, '/schedules', { done: paused ? 'paused' : 'resumed' }) };
  };
}

export const pauseSchedule = setPaused(true);
export const resumeSchedule = setPaused(false);
