/**
 * What a flow is made of, shared by its parts (`flows.ts` writes a flow, `flow-run.ts` runs it,
 * `flow-view.ts` shows it): the flow job's type and payload, the meta headers of its nodes, the
 * checkpoints it keeps per node, and reading them back — a node's result, a tally of how
 * parents ended, and `ctx.flow` for a node's handler.
 */
import type { Job, JobError, JobStore } from '../store.js';
import type { EnqueueJobOptions, FlowContext, FlowTally } from './types.js';

/** The job type of a flow job (run by every engine with handlers on a store with `waits`). */
export const FLOW_TYPE = '$flow';
/** The `Job.meta` header naming a node's flow (the flow job's id). */
export const FLOW_META = 'jobs.flow';
/** The `Job.meta` header naming a node within its flow. */
export const FLOW_NODE_META = 'jobs.flow.node';
/** Most nodes one flow (or batch, its callback included) holds. */
export const MAX_FLOW_NODES = 1000;
/** Longest node name, in characters. */
export const MAX_FLOW_NODE_NAME_CHARS = 100;

/** A node's own enqueue options (its key, transaction and absolute due time are the flow's). */
export type FlowNodeOptions = Omit<EnqueueJobOptions, 'tx' | 'key' | 'keyMode' | 'runAt'>;

/** How a node ended that did not complete, as the flow job records it. */
export interface FlowNodeEnd {
  outcome: 'deadletter' | 'cancelled' | 'skipped';
  jobId: string | null;
  error: JobError | null;
  /** Why a skipped node was skipped: `skipped: parent a dead-lettered`. */
  reason?: string;
}

/** A node as the flow job's payload keeps it (an array: JSONB does not keep key order). */
export interface StoredFlowNode {
  name: string;
  type: string;
  payload: unknown;
  dependsOn: string[];
  after: 'completed' | 'finished';
  options: FlowNodeOptions;
}

/** The flow job's payload. */
export interface StoredFlow {
  flow: 1;
  nodes: StoredFlowNode[];
}

/** The checkpoint names the flow job keeps per node: its child job, and how it failed. */
export const nodeStep = (name: string): string => `node:${name}`;
export const endStep = (name: string): string => `end:${name}`;

/** A flow job's step results by name (`Job.steps`). */
export function stepsByName(job: Pick<Job, 'steps'>): Map<string, unknown> {
  return new Map((job.steps ?? []).map((step) => [step.name, step.result]));
}

/** A node's completed result as the flow job checkpointed it, if it completed. */
export function completedResult(
  steps: Map<string, unknown>,
  name: string,
): { result: unknown } | null {
  const record = steps.get(nodeStep(name)) as { outcome?: unknown; result?: unknown } | undefined;
  return record?.outcome === 'completed' ? { result: record.result ?? null } : null;
}

/**
 * How node `name` ended, once it ended: the flow job's record (`end:<name>`, written once every
 * node ended), its checkpoint (completed, cancelled), else its job (dead-lettered, or its
 * history record) — one read; a node never started is skipped. Null while it has not ended.
 */
export async function nodeEndOf(
  store: JobStore,
  steps: Map<string, unknown>,
  name: string,
): Promise<{ outcome: 'completed' } | FlowNodeEnd | null> {
  if (completedResult(steps, name)) return { outcome: 'completed' };
  const end = steps.get(endStep(name)) as FlowNodeEnd | undefined;
  if (end) return end;
  const started = steps.get(nodeStep(name)) as { $child?: unknown; outcome?: unknown } | undefined;
  if (typeof started?.$child !== 'string') {
    return { outcome: 'skipped', jobId: null, error: null };
  }
  const jobId = started.$child;
  if (started.outcome === 'cancelled') return { outcome: 'cancelled', jobId, error: null };
  const job = await store.getJob(jobId);
  if (job !== null) {
    return job.state === 'deadletter'
      ? { outcome: 'deadletter', jobId, error: job.lastError }
      : null;
  }
  const record = (await store.history?.get(jobId)) ?? null;
  if (record?.outcome === 'completed') return { outcome: 'completed' };
  const outcome = record?.outcome === 'deadletter' ? 'deadletter' : 'cancelled';
  return { outcome, jobId, error: record?.lastError ?? null };
}

/** The tally of how `parents` ended (they all did), from the flow job's steps and their jobs. */
export async function tallyOf(
  store: JobStore,
  steps: Map<string, unknown>,
  parents: readonly string[],
): Promise<FlowTally> {
  const tally: FlowTally = {
    completed: 0,
    deadlettered: 0,
    cancelled: 0,
    skipped: 0,
    failures: [],
  };
  for (const parent of parents) {
    const end = await nodeEndOf(store, steps, parent);
    if (end === null || end.outcome === 'completed') {
      tally.completed += end === null ? 0 : 1;
      continue;
    }
    if (end.outcome === 'deadletter') tally.deadlettered += 1;
    else if (end.outcome === 'cancelled') tally.cancelled += 1;
    else tally.skipped += 1;
    tally.failures.push({ node: parent, id: end.jobId, outcome: end.outcome, error: end.error });
  }
  return tally;
}

/**
 * `ctx.flow` of a flow node: its parents' results (and with `after: 'finished'` their tally),
 * read from the flow job, live or in history. Null when the flow job is gone altogether.
 */
export async function flowContextOf(store: JobStore, job: Job): Promise<FlowContext | null> {
  const flowId = job.meta?.[FLOW_META];
  const node = job.meta?.[FLOW_NODE_META];
  if (flowId === undefined || node === undefined) return null;
  const flowJob = (await store.getJob(flowId)) ?? (await store.history?.get(flowId)) ?? null;
  if (flowJob === null) return { id: flowId, node, parents: {}, ended: null };
  const stored = flowJob.payload as StoredFlow;
  const definition = stored?.nodes?.find((n) => n.name === node);
  const steps = stepsByName(flowJob);
  const parents: Record<string, unknown> = {};
  for (const parent of definition?.dependsOn ?? []) {
    const done = completedResult(steps, parent);
    if (done) parents[parent] = done.result;
  }
  const ended =
    definition?.after === 'finished' ? await tallyOf(store, steps, definition.dependsOn) : null;
  return { id: flowId, node, parents, ended };
}

/**
 * After nodes of a flow ended (their job ids, `done`): whether a node that has not started yet
 * can start now — every parent ended — so that the settler wakes the flow job at once rather
 * than when the last node it waits for ended (`settlement.ts`). A parent counts as ended
 * when the flow job recorded it, when it is among `done`, or when its job is dead-lettered or
 * gone; a read per parent looked at, from the last back to the first unfinished one.
 */
export async function flowNodeCanStart(
  store: JobStore,
  flowJob: Job,
  done: ReadonlySet<string>,
): Promise<boolean> {
  const stored = flowJob.payload as StoredFlow | null;
  if (!Array.isArray(stored?.nodes)) return false;
  const steps = stepsByName(flowJob);
  const jobIdOf = (name: string): string | null => {
    const started = steps.get(nodeStep(name)) as { $child?: unknown } | undefined;
    return typeof started?.$child === 'string' ? started.$child : null;
  };
  const endedNames = new Set(
    stored.nodes.map((n) => n.name).filter((name) => done.has(jobIdOf(name) ?? '')),
  );
  if (endedNames.size === 0) return false;
  const looked = new Map<string, boolean>();
  const ended = async (name: string): Promise<boolean> => {
    if (endedNames.has(name) || steps.has(endStep(name)) || completedResult(steps, name)) {
      return true;
    }
    const id = jobIdOf(name);
    if (id === null) return false;
    const known = looked.get(id);
    if (known !== undefined) return known;
    const job = await store.getJob(id);
    const result = job === null || job.state === 'deadletter';
    looked.set(id, result);
    return result;
  };
  for (const node of stored.nodes) {
    if (jobIdOf(node.name) !== null || steps.has(endStep(node.name))) continue;
    if (!node.dependsOn.some((parent) => endedNames.has(parent))) continue;
    // From the last parent back, as `wakeParent` looks at children: nodes start in the order
    // they were enqueued, so the last are the likeliest unfinished, and a batch's callback costs
    // a read or two per item until its last items end.
    let ready = true;
    for (let i = node.dependsOn.length - 1; i >= 0; i--) {
      if (!(await ended(node.dependsOn[i] as string))) {
        ready = false;
        break;
      }
    }
    if (ready) return true;
  }
  return false;
}
