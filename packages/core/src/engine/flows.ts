/**
 * Flows and batches (`engine.flow`, `engine.batch`): a DAG of jobs checked and written in one
 * enqueue, then run by a *flow job* — a workflow job of the built-in type `$flow` whose handler
 * (`flow-run.ts`) starts each node as a child job (`ctx.run`) once its parents ended. The flow's
 * id is that job's id. Building on child jobs gives a flow what they have: nodes enqueued once
 * (fenced by the flow job's lease), no worker held while nodes run, a wake-up when they end
 * (with a recheck for a lost one), a cancel cascade, and the flow's state in one job's step
 * list, which `admin.getFlow` reads (`flow-view.ts`).
 *
 * This file holds the definitions' types, their checks (unknown parents, cycles, sizes: a
 * `ValidationError` naming the node, nothing written) and the write; what the parts share is
 * `flow-model.ts`.
 */
import { JobsError, ValidationError } from '../errors.js';
import { UNSTORABLE_IN_JSON } from '../rules.js';
import type { Job, JobStore } from '../store.js';
import {
  FLOW_META,
  FLOW_NODE_META,
  FLOW_TYPE,
  type FlowNodeOptions,
  MAX_FLOW_NODE_NAME_CHARS,
  MAX_FLOW_NODES,
  type StoredFlow,
  type StoredFlowNode,
} from './flow-model.js';
import { type EngineRuntime, enqueueJobs } from './runtime.js';
import { PARENT_META } from './settlement.js';
import { assertKnownKeys, ENQUEUE_OPTION_KEYS, toNewJob } from './validate.js';

/** One node of `engine.flow`: a job with the names of the nodes it waits for. */
export interface FlowNode extends FlowNodeOptions {
  type: string;
  payload?: unknown;
  /** The nodes this one starts after (their names); none: it starts at once. */
  dependsOn?: readonly string[];
  /**
   * `'completed'` (default): starts once every parent completed; a parent dead-lettered,
   * cancelled or skipped skips it. `'finished'`: starts once every parent ended, whatever the
   * outcome, and reads the tally in `ctx.flow.ended` (a batch's callback).
   */
  after?: 'completed' | 'finished';
}

export interface FlowDefinition {
  nodes: Record<string, FlowNode>;
}

const NODE_KEYS: ReadonlySet<string> = new Set([
  'type',
  'payload',
  'dependsOn',
  'after',
  // A node's key is the flow's, and it starts when its parents end.
  ...[...ENQUEUE_OPTION_KEYS].filter((key) => !['key', 'keyMode', 'runAt', 'tx'].includes(key)),
]);

/** `engine.flow(definition, { tx })`: checks the DAG, writes the flow job; answers its id. */
export async function enqueueFlow(
  rt: EngineRuntime,
  definition: FlowDefinition,
  options: { tx?: unknown } = {},
): Promise<{ id: string }> {
  assertStoreRunsFlows(rt.options.store, 'engine.flow');
  const stored = checkFlow(rt, definition, 'engine.flow');
  const [job] = await enqueueJobs(rt, [{ type: FLOW_TYPE, payload: stored }], { tx: options.tx });
  return { id: (job as Job).id };
}

/** One job of `engine.batch`. */
export interface BatchItem extends FlowNodeOptions {
  type: string;
  payload?: unknown;
}

/**
 * `engine.batch(items, { callback }, { tx })`: a flow of the items (nodes `0`, `1`, …) and a
 * node `callback` that runs once after every item ended (`after: 'finished'`).
 */
export async function enqueueBatch(
  rt: EngineRuntime,
  items: readonly BatchItem[],
  batch: { callback: BatchItem },
  options: { tx?: unknown } = {},
): Promise<{ id: string }> {
  if (!Array.isArray(items) || items.length === 0) {
    throw new ValidationError('items', 'engine.batch: items must be a non-empty array of jobs');
  }
  if (typeof batch !== 'object' || batch === null || typeof batch.callback !== 'object') {
    throw new ValidationError('callback', 'engine.batch: give { callback: { type, payload? } }');
  }
  const nodes: Record<string, FlowNode> = {};
  for (const [i, item] of items.entries()) nodes[String(i)] = item;
  nodes.callback = {
    ...batch.callback,
    dependsOn: items.map((_, i) => String(i)),
    after: 'finished',
  };
  return enqueueFlow(rt, { nodes }, options);
}

export function assertStoreRunsFlows(store: JobStore, call: string): void {
  if (!store.steps || !store.waits) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ${call}: the ${store.name} store cannot run flows (it has no \`steps\` and \`waits\`)`,
    );
  }
}

/** Checks a definition; a `ValidationError` names the node and its field. */
export function checkFlow(rt: EngineRuntime, definition: FlowDefinition, call: string): StoredFlow {
  if (typeof definition !== 'object' || definition === null) {
    throw new ValidationError('definition', `${call}: give { nodes: { name: { type, … } } }`);
  }
  assertKnownKeys(definition, new Set(['nodes']), 'definition');
  const given = definition.nodes;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new ValidationError('nodes', `${call}: nodes must be an object of nodes by name`);
  }
  const names = Object.keys(given);
  if (names.length === 0)
    throw new ValidationError('nodes', `${call}: a flow has at least one node`);
  if (names.length > MAX_FLOW_NODES) {
    throw new ValidationError(
      'nodes',
      `${call}: ${names.length} nodes, more than the limit of ${MAX_FLOW_NODES} (MAX_FLOW_NODES)`,
    );
  }
  const nodes = names.map((name) => checkNode(rt, name, given[name], given, call));
  assertAcyclic(nodes, call);
  return { flow: 1, nodes };
}

function checkNode(
  rt: EngineRuntime,
  name: string,
  node: FlowNode | undefined,
  all: Record<string, FlowNode>,
  call: string,
): StoredFlowNode {
  const field = `nodes.${name}`;
  if (
    name === '' ||
    name.length > MAX_FLOW_NODE_NAME_CHARS ||
    name.includes('#') ||
    UNSTORABLE_IN_JSON.test(name)
  ) {
    throw new ValidationError(
      field,
      `${call}: a node's name is 1 to ${MAX_FLOW_NODE_NAME_CHARS} characters without '#' or control characters`,
    );
  }
  if (typeof node !== 'object' || node === null) {
    throw new ValidationError(
      field,
      `${call}: node "${name}" must be { type, payload?, dependsOn? }`,
    );
  }
  const { type, payload, dependsOn = [], after = 'completed', ...options } = node;
  for (const key of Object.keys(node)) {
    if (!NODE_KEYS.has(key)) {
      throw new ValidationError(
        `${field}.${key}`,
        `${call}: node "${name}" has an unknown option "${key}" (a node takes no tx, key, keyMode or runAt: its flow's)`,
      );
    }
  }
  if (!Array.isArray(dependsOn) || dependsOn.some((p) => typeof p !== 'string')) {
    throw new ValidationError(
      `${field}.dependsOn`,
      `${call}: node "${name}": dependsOn is an array of node names`,
    );
  }
  for (const parent of dependsOn) {
    if (parent === name) {
      throw new ValidationError(`${field}.dependsOn`, `${call}: node "${name}" depends on itself`);
    }
    if (!Object.hasOwn(all, parent)) {
      throw new ValidationError(
        `${field}.dependsOn`,
        `${call}: node "${name}" depends on "${parent}", which is not a node of this flow`,
      );
    }
  }
  if (new Set(dependsOn).size !== dependsOn.length) {
    throw new ValidationError(`${field}.dependsOn`, `${call}: node "${name}" names a parent twice`);
  }
  if (after !== 'completed' && after !== 'finished') {
    throw new ValidationError(
      `${field}.after`,
      `${call}: node "${name}": after is 'completed' or 'finished'`,
    );
  }
  // Checked as its child job will be enqueued (the flow's meta headers included).
  const meta = {
    ...(options.meta ?? {}),
    [FLOW_META]: 'x',
    [FLOW_NODE_META]: name,
    [PARENT_META]: 'x',
  };
  const { handlers, retries, maxPayloadBytes } = rt.options;
  try {
    toNewJob(
      type,
      payload,
      { ...options, meta },
      {
        retries,
        maxPayloadBytes,
        typeRetries: handlers.get(type)?.retries,
        typeScopeLimit: handlers.get(type)?.scopeLimit,
      },
    );
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw new ValidationError(
      `${field}.${error.field}`,
      `${call}: node "${name}": ${error.message}`,
    );
  }
  return { name, type, payload: payload ?? null, dependsOn: [...dependsOn], after, options };
}

/** Refuses a cycle, naming its nodes in order (`a → b → a`). */
function assertAcyclic(nodes: readonly StoredFlowNode[], call: string): void {
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const mark = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (name: string): void => {
    const state = mark.get(name);
    if (state === 'done') return;
    if (state === 'visiting') {
      const cycle = [...path.slice(path.indexOf(name)), name];
      throw new ValidationError(
        `nodes.${name}.dependsOn`,
        `${call}: the nodes ${cycle.map((n) => `"${n}"`).join(' → ')} form a cycle`,
      );
    }
    mark.set(name, 'visiting');
    path.push(name);
    for (const parent of (byName.get(name) as StoredFlowNode).dependsOn) visit(parent);
    path.pop();
    mark.set(name, 'done');
  };
  for (const node of nodes) visit(node.name);
}
