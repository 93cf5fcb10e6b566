/**
 * The child's side of `ctx.run` (the parent's side is `children.ts`): how a child job's outcome
 * reaches its parent, and how a cancel reaches a parent's children. Everything goes through the
 * store's `waits` signals, so it works on every store with `waits` and needs no table of its own.
 *
 * - A child carries its parent's id in `Job.meta` (`PARENT_META`).
 * - **Its result first, its completion second.** Before a child's completion is written, the
 *   engine stores a signal `$child` keyed by the child's id whose payload is the outcome
 *   (`{ outcome: 'completed', result }`). The result is durable before the child leaves the
 *   live table, so it reaches the parent with history off; the parent *takes* it in the same
 *   transaction that checkpoints it (`StoreWaits.takeSignal`). Should the completion then be
 *   lost (the lease lapsed), the child runs again and its later signal is never taken: the
 *   parent keeps the first result.
 * - **Completed in `ctx.transaction`, its result after.** The completion commits before the
 *   handler returns, so its result is sent afterwards; the history record the transaction writes
 *   says so meanwhile (`RESULT_PENDING_JSON`, replaced by the result when the handler returns).
 *   A parent that finds the child completed with that marker and no result signal keeps waiting
 *   (rechecking) for a lease after the completion; then the result went with the child's process
 *   and `ctx.run` throws `ChildJobError` (`lost`) — never a `null` the child did not return.
 * - **The wake-up, after the child ended** (completed, dead-lettered, cancelled): the settler
 *   reads the parent's step list (its `ctx.run` checkpoints name the children it waits for) and
 *   sends the signal `$children` keyed by the parent's id only when none of those children is
 *   still unfinished (live and not dead-lettered). Each settler looks after its own settle
 *   committed, so the last of several finishing at once sees the others gone: the parent is
 *   woken once the last child ended (two may both send it; the parent takes the spare one when
 *   it resumes). A settler that dies before it wakes the parent loses nothing but time: a
 *   parked parent looks at its children again every `childRecheckMs`.
 */
import { UnrecoverableError } from '../errors.js';
import { assertCanCancel, type CancelOutcome, type Job, type JobStore } from '../store.js';
import { FLOW_TYPE, flowNodeCanStart } from './flow-model.js';
import { jsonText } from './payload-check.js';
import { MAX_SIGNAL_PAYLOAD_BYTES } from './waits.js';

/** The `Job.meta` header that names a child job's parent (its id). */
export const PARENT_META = 'jobs.parent';
/** The signal carrying a child's outcome to its parent, keyed by the child's id. */
export const RESULT_SIGNAL = '$child';
/** The signal that wakes a parent whose children all ended, keyed by the parent's id. */
export const WAKE_SIGNAL = '$children';

/**
 * The history result of a child job completed in `ctx.transaction` until its handler returned
 * (a `HistoryResultMarker`): its result is still to be sent.
 */
export const RESULT_PENDING_JSON = '{"$jobs":"result-pending"}';

/** Whether a history record's result is `RESULT_PENDING_JSON`'s marker. */
export function isResultPending(result: unknown): boolean {
  return (
    typeof result === 'object' &&
    result !== null &&
    (result as { $jobs?: unknown }).$jobs === 'result-pending'
  );
}

/** How a child ended, as its result signal and the parent's checkpoint say it. */
export interface ChildOutcomeRecord {
  outcome: 'completed' | 'cancelled';
  result?: unknown;
}

/** The id of `job`'s parent when it is a child job (`ctx.run`), else null. */
export function parentOf(job: Job): string | null {
  return job.meta?.[PARENT_META] ?? null;
}

/**
 * The ids of the children a job with these steps waits for: its `ctx.run` checkpoints
 * (`{ $child: id }`) that have no outcome yet.
 */
export function pendingChildIds(steps: ReadonlyArray<{ result: unknown }> | undefined): string[] {
  const ids: string[] = [];
  for (const step of steps ?? []) {
    const result = step.result as { $child?: unknown; outcome?: unknown } | null;
    if (typeof result !== 'object' || result === null) continue;
    if (typeof result.$child === 'string' && result.outcome === undefined) ids.push(result.$child);
  }
  return ids;
}

/**
 * The payload of a completed child's result signal, or an `UnrecoverableError` when the result
 * cannot travel (more than a signal holds): the child then fails for good, saying why.
 */
export function completedPayload(childId: string, result: unknown): string {
  const text = `{"outcome":"completed","result":${jsonText(result ?? null, 'result')}}`;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new UnrecoverableError(
      `child job ${childId} returned ${bytes} bytes of JSON, more than its parent can receive (${MAX_SIGNAL_PAYLOAD_BYTES}, MAX_SIGNAL_PAYLOAD_BYTES): store large data elsewhere and return a reference`,
    );
  }
  return text;
}

const CANCELLED_PAYLOAD = '{"outcome":"cancelled"}';

/** Stores child `job`'s outcome for its parent (before its completion is written). */
export async function sendChildOutcome(
  store: JobStore,
  job: Job,
  payloadJson: string,
): Promise<void> {
  await store.waits?.signal(RESULT_SIGNAL, job.id, payloadJson);
}

/**
 * After jobs ended (one settle's worth): wakes each parent among theirs when none of the
 * children it waits for is unfinished — one look per parent, however many of its children the
 * settle ended. The look goes from the last child enqueued back and stops at the first
 * unfinished one: children start in the order they were enqueued, so the last ones are the
 * likeliest to be unfinished, and a settle costs a read or two per parent until the last child.
 */
export async function wakeParentsIfDone(store: JobStore, ended: readonly Job[]): Promise<void> {
  const byParent = new Map<string, Set<string>>();
  for (const job of ended) {
    const parentId = parentOf(job);
    if (parentId === null) continue;
    const done = byParent.get(parentId) ?? new Set<string>();
    done.add(job.id);
    byParent.set(parentId, done);
  }
  for (const [parentId, done] of byParent) await wakeParent(store, parentId, done);
}

async function wakeParent(store: JobStore, parentId: string, done: Set<string>): Promise<void> {
  if (!store.waits) return;
  const parent = await store.getJob(parentId);
  if (!parent) return;
  // A flow job is woken as soon as one of its nodes can start, not only after its last node.
  if (parent.type === FLOW_TYPE && (await flowNodeCanStart(store, parent, done))) {
    await store.waits.signal(WAKE_SIGNAL, parentId, 'null');
    return;
  }
  const siblings = pendingChildIds(parent.steps).filter((id) => !done.has(id));
  for (let i = siblings.length - 1; i >= 0; i--) {
    const sibling = await store.getJob(siblings[i] as string);
    if (sibling !== null && sibling.state !== 'deadletter') return;
  }
  await store.waits.signal(WAKE_SIGNAL, parentId, 'null');
}

/**
 * A cancelled child: its outcome for its parent, then the parent's wake-up — unless the parent
 * is gone (cancelled with it): nobody would take the outcome.
 */
export async function childCancelled(store: JobStore, job: Job): Promise<void> {
  const parentId = parentOf(job);
  if (parentId === null || (await store.getJob(parentId)) === null) return;
  await sendChildOutcome(store, job, CANCELLED_PAYLOAD);
  await wakeParentsIfDone(store, [job]);
}

/**
 * Cancels the unfinished children of a cancelled parent whose step list is `steps`, and
 * theirs in turn. Their parent is gone, so no outcome is sent to it.
 */
export async function cancelChildren(
  store: JobStore,
  steps: ReadonlyArray<{ result: unknown }> | undefined,
): Promise<void> {
  for (const id of pendingChildIds(steps)) await cancelTree(store, id, false);
}

/**
 * `admin.cancel(id)` with its cascade: cancels job `id`, then its unfinished children (and
 * theirs); a cancelled child's parent gets its outcome when `tellParent`.
 */
export async function cancelTree(
  store: JobStore,
  id: string,
  tellParent: boolean,
): Promise<CancelOutcome> {
  const cancellation = assertCanCancel(store, 'admin.cancel');
  const job = store.waits ? await store.getJob(id) : null;
  const outcome = await cancellation.cancel(id);
  if (job === null) return outcome;
  await cancelChildren(store, job.steps);
  // A running child ends cancelled on its owner, which tells the parent then.
  if (tellParent && outcome === 'cancelled') await childCancelled(store, job);
  return outcome;
}
