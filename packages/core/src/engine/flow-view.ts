/**
 * `admin.getFlow(id)`: a flow's status and its nodes, read from the flow job (live, else its
 * history record) and, for nodes whose outcome the flow job has not recorded yet, their own jobs
 * — by id, so a view costs one read per such node (live table, then history), never a scan.
 */
import type { Job, JobError, JobHistoryRecord, JobState, JobStore } from '../store.js';
import {
  completedResult,
  endStep,
  FLOW_TYPE,
  type FlowNodeEnd,
  nodeStep,
  type StoredFlow,
  stepsByName,
} from './flow-model.js';
import type { FlowSummary } from './flow-run.js';

/** A flow's status: `running` until every node ended; `failed` when one did not complete. */
export type FlowStatus = 'running' | 'completed' | 'failed' | 'cancelled';

/** A node's state: not started yet (`pending`), its job's state, or how it ended. */
export type FlowNodeState =
  | 'pending'
  | JobState
  | 'completed'
  | 'cancelled'
  | 'skipped'
  | 'unknown';

export interface FlowNodeView {
  name: string;
  type: string;
  dependsOn: string[];
  after: 'completed' | 'finished';
  /** Its job's id once started; null while pending, or when skipped. */
  jobId: string | null;
  state: FlowNodeState;
  /** A completed node's result. */
  result?: unknown;
  /** A dead-lettered node's last error. */
  error?: JobError | null;
  /** Why a skipped node was skipped. */
  reason?: string;
}

export interface FlowView {
  id: string;
  status: FlowStatus;
  /** Nodes in the order the flow defined them. */
  nodes: FlowNodeView[];
}

export async function readFlow(store: JobStore, id: string): Promise<FlowView | null> {
  const live = await store.getJob(id);
  const record: Job | JobHistoryRecord | null = live ?? (await store.history?.get(id)) ?? null;
  if (record === null || record.type !== FLOW_TYPE) return null;
  const steps = stepsByName(record);
  const stored = record.payload as StoredFlow;
  const nodes: FlowNodeView[] = [];
  for (const node of stored.nodes) {
    const view: FlowNodeView = {
      name: node.name,
      type: node.type,
      dependsOn: node.dependsOn,
      after: node.after,
      jobId: null,
      state: 'pending',
    };
    const started = steps.get(nodeStep(node.name)) as { $child?: string } | undefined;
    if (typeof started?.$child === 'string') view.jobId = started.$child;
    const done = completedResult(steps, node.name);
    const end = steps.get(endStep(node.name)) as FlowNodeEnd | undefined;
    if (done) {
      view.state = 'completed';
      view.result = done.result;
    } else if (end) {
      view.state = end.outcome;
      view.jobId = end.jobId ?? view.jobId;
      if (end.error) view.error = end.error;
      if (end.reason) view.reason = end.reason;
    } else if (view.jobId !== null) {
      await readNodeJob(store, view, view.jobId);
    }
    nodes.push(view);
  }
  markSkipped(nodes);
  return { id, status: statusOf(record, live !== null), nodes };
}

/**
 * Pending nodes of a running flow that will never start — a parent dead-lettered, cancelled or
 * skipped, and no `after: 'finished'` — are shown skipped (the flow job records it once every
 * node ended), with the reason.
 */
function markSkipped(nodes: FlowNodeView[]): void {
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const words: Partial<Record<FlowNodeState, string>> = {
    deadletter: 'dead-lettered',
    cancelled: 'cancelled',
    skipped: 'skipped',
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (const node of nodes) {
      if (node.state !== 'pending' || node.after === 'finished') continue;
      const failed = node.dependsOn.find((p) => words[byName.get(p)?.state ?? 'pending']);
      if (failed === undefined) continue;
      node.state = 'skipped';
      node.reason = `skipped: parent ${failed} ${words[byName.get(failed)?.state ?? 'pending']}`;
      changed = true;
    }
  }
}

/** A started node the flow job has no outcome for yet: its own job says where it is. */
async function readNodeJob(store: JobStore, view: FlowNodeView, jobId: string): Promise<void> {
  const job = await store.getJob(jobId);
  if (job !== null) {
    view.state = job.state;
    if (job.state === 'deadletter') view.error = job.lastError;
    return;
  }
  const finished = (await store.history?.get(jobId)) ?? null;
  if (finished === null) {
    view.state = 'unknown';
    return;
  }
  view.state = finished.outcome;
  if (finished.outcome === 'completed') view.result = finished.result;
  else view.error = finished.lastError;
}

function statusOf(record: Job | JobHistoryRecord, live: boolean): FlowStatus {
  if (live) return record.state === 'deadletter' ? 'failed' : 'running';
  const { outcome, result } = record as JobHistoryRecord;
  if (outcome === 'cancelled') return 'cancelled';
  if (outcome !== 'completed') return 'failed';
  return (result as FlowSummary | null)?.status === 'completed' ? 'completed' : 'failed';
}
