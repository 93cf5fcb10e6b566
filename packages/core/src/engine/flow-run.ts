/**
 * The flow job's handler (type `$flow`, see `flows.ts`): runs a flow's nodes as child jobs in
 * the order of their dependencies. It is an ordinary workflow handler and everything it does
 * is a checkpoint of the flow job, so a crash, a retry or another node taking it over resumes
 * it where it was:
 *
 * - Every node whose parents all ended is started (`ctx.run`, checkpoint `node:<name>`), also
 *   from within a run as soon as a node it looks at turns out to have ended; once it started
 *   every node it can, the flow job parks once for all unfinished ones, holding no worker. It
 *   is woken when one of them ended and a node can start now (`flowNodeCanStart`, run by the
 *   settler of that node), else when the last of them ended — or after `childRecheckMs`,
 *   should that wake-up be lost. Nodes that completed in an earlier run are read from their
 *   checkpoints.
 * - **Skips.** A node whose parent was dead-lettered, cancelled or skipped is never started: it
 *   is skipped, and so are its own dependents in turn — unless it takes `after: 'finished'` (a
 *   batch callback), which starts once every parent ended, whatever the outcome.
 * - Once every node ended, how each that did not complete ended is recorded (`end:<name>`, with
 *   a skip's reason), and the flow job completes. Until then a dead-lettered node is looked at
 *   again on each run: an operator who retries it gets the flow going on from it.
 * - The flow job completes when every node ended, with `{ status, nodes }`: `completed` when
 *   every node completed, else `failed`. Cancelling it cancels its unfinished nodes.
 */
import { ChildJobError } from '../errors.js';
import type { Job, JobError } from '../store.js';
import {
  completedResult,
  endStep,
  FLOW_META,
  FLOW_NODE_META,
  type FlowNodeEnd,
  nodeStep,
  type StoredFlow,
  type StoredFlowNode,
  stepsByName,
} from './flow-model.js';
import type { JobContext } from './types.js';

/** What a finished flow job returns (its history record keeps it). */
export interface FlowSummary {
  status: 'completed' | 'failed';
  /** Each node's outcome by name. */
  nodes: Record<string, 'completed' | FlowNodeEnd['outcome']>;
}

type NodeEnd = { outcome: 'completed' } | FlowNodeEnd;

const OUTCOME_WORDS: Record<FlowNodeEnd['outcome'], string> = {
  deadletter: 'dead-lettered',
  cancelled: 'cancelled',
  skipped: 'skipped',
};

export async function runFlow(job: Job<StoredFlow>, ctx: JobContext): Promise<FlowSummary> {
  const { nodes } = job.payload;
  const ends = new Map<string, NodeEnd>();
  const earlier = stepsByName(job);
  for (const node of nodes) {
    const end = earlier.get(endStep(node.name)) as FlowNodeEnd | undefined;
    if (end) ends.set(node.name, end);
    else if (completedResult(earlier, node.name)) ends.set(node.name, { outcome: 'completed' });
  }
  /** Ends found in this run, recorded (`end:<name>`) once every node ended. */
  const toRecord: string[] = [];
  const running = new Map<string, Promise<void>>();
  let interrupted: { error: unknown } | null = null;
  // Starts every node whose parents all ended — synchronously, also from the continuation of
  // a node found ended: a `ctx.run` call made then joins the calls the run is gathering, so
  // the flow job parks once, after it started every node it can (never after the park).
  const launch = (): void => {
    for (let changed = true; changed && interrupted === null; ) {
      changed = false;
      for (const node of nodes) {
        if (ends.has(node.name) || running.has(node.name)) continue;
        const parents = node.dependsOn.map((name) => [name, ends.get(name)] as const);
        if (parents.some(([, end]) => end === undefined)) continue;
        const failed = parents.find(([, end]) => end?.outcome !== 'completed');
        if (failed && node.after !== 'finished') {
          const [parent, end] = failed as readonly [string, FlowNodeEnd];
          ends.set(node.name, {
            outcome: 'skipped',
            jobId: null,
            error: null,
            reason: `skipped: parent ${parent} ${OUTCOME_WORDS[end.outcome]}`,
          });
          toRecord.push(node.name);
          changed = true;
          continue;
        }
        running.set(
          node.name,
          startNode(job, ctx, node).then(
            () => {
              running.delete(node.name);
              ends.set(node.name, { outcome: 'completed' });
              launch();
            },
            (error: unknown) => {
              running.delete(node.name);
              if (!(error instanceof ChildJobError)) {
                // The park (or a lost lease): this run ends; nothing more is started.
                interrupted ??= { error };
                return;
              }
              ends.set(node.name, {
                outcome: error.outcome === 'deadletter' ? 'deadletter' : 'cancelled',
                jobId: error.childId,
                error: errorOf(error.lastError),
              });
              toRecord.push(node.name);
              launch();
            },
          ),
        );
      }
    }
  };
  launch();
  while (running.size > 0) await Promise.all([...running.values()]);
  if (interrupted !== null) throw (interrupted as { error: unknown }).error;
  // Every node ended: how the ones that did not complete ended is recorded, once.
  for (const name of toRecord) {
    await ctx.step<FlowNodeEnd>(endStep(name), () => ends.get(name) as FlowNodeEnd);
  }
  const summary: FlowSummary = { status: 'completed', nodes: {} };
  for (const node of nodes) {
    const outcome = (ends.get(node.name) as NodeEnd).outcome;
    summary.nodes[node.name] = outcome;
    if (outcome !== 'completed') summary.status = 'failed';
  }
  return summary;
}

function startNode(job: Job, ctx: JobContext, node: StoredFlowNode): Promise<unknown> {
  const meta = { ...(node.options.meta ?? {}), [FLOW_META]: job.id, [FLOW_NODE_META]: node.name };
  return ctx.run(nodeStep(node.name), node.type, node.payload, { ...node.options, meta });
}

function errorOf(error: JobError | null): JobError | null {
  return error === null ? null : { message: error.message, stack: error.stack };
}
