/**
 * `engine.flow` and `engine.batch` in the engine (the stores' side is the conformance `flows`
 * group): a bad definition — unknown parent, cycle, no nodes, too many, a bad node option — is a
 * `ValidationError` naming the node, with nothing written; a diamond runs in order on the
 * memory store with `ctx.flow`; a job that is not a flow node has `ctx.flow` null; the flow job
 * type is run only by engines with handlers on a store with `waits`; a running flow shows a
 * node skipped once its parent is dead-lettered; a cancelled node skips its dependent, and a
 * node with `after: 'finished'` reads the tally.
 */
import { describe, expect, it } from 'vitest';
import {
  FLOW_TYPE,
  type Job,
  type JobContext,
  type JobEngine,
  MAX_FLOW_NODES,
  MemoryJobStore,
  ValidationError,
} from '../src/index.js';
import { engine, waitFor } from './helpers.js';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

async function refused(
  e: JobEngine,
  definition: unknown,
): Promise<{ error: ValidationError; written: number }> {
  const error = await e.flow(definition as never).catch((thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(ValidationError);
  const written = (await e.admin.listJobs({ limit: 100 })).length;
  return { error: error as ValidationError, written };
}

describe('engine.flow: a bad definition is refused, naming the node, with nothing written', () => {
  const store = () => new MemoryJobStore();

  it('a parent that is not a node', async () => {
    const e = engine({ store: store(), logger: quiet });
    const { error, written } = await refused(e, {
      nodes: { a: { type: 'x' }, b: { type: 'y', dependsOn: ['a', 'nope'] } },
    });
    expect(error.field).toBe('nodes.b.dependsOn');
    expect(error.message).toContain('"nope"');
    expect(written).toBe(0);
  });

  it('a cycle, named in order, and a node depending on itself', async () => {
    const e = engine({ store: store(), logger: quiet });
    const { error, written } = await refused(e, {
      nodes: {
        a: { type: 'x' },
        b: { type: 'x', dependsOn: ['a', 'd'] },
        c: { type: 'x', dependsOn: ['b'] },
        d: { type: 'x', dependsOn: ['c'] },
      },
    });
    expect(error.message).toContain('"b" → "d" → "c" → "b" form a cycle');
    expect(written).toBe(0);
    const self = await refused(e, { nodes: { a: { type: 'x', dependsOn: ['a'] } } });
    expect(self.error.message).toContain('node "a" depends on itself');
  });

  it('no nodes, too many nodes, a bad name, an unknown or bad node option', async () => {
    const e = engine({ store: store(), logger: quiet });
    expect((await refused(e, { nodes: {} })).error.field).toBe('nodes');
    const many = Object.fromEntries(
      Array.from({ length: MAX_FLOW_NODES + 1 }, (_, i) => [`n${i}`, { type: 'x' }]),
    );
    expect((await refused(e, { nodes: many })).error.message).toContain('MAX_FLOW_NODES');
    expect((await refused(e, { nodes: { 'a#1': { type: 'x' } } })).error.field).toBe('nodes.a#1');
    const key = await refused(e, { nodes: { a: { type: 'x', key: 'k' } } });
    expect(key.error.field).toBe('nodes.a.key');
    const priority = await refused(e, { nodes: { a: { type: 'x', priority: 'high' } } });
    expect(priority.error.field).toBe('nodes.a.priority');
    const type = await refused(e, { nodes: { a: { type: '' } } });
    expect(type.error.field).toBe('nodes.a.type');
    expect(type.written).toBe(0);
  });

  it('engine.batch without items or without a callback', async () => {
    const e = engine({ store: store(), logger: quiet });
    await expect(e.batch([], { callback: { type: 'done' } })).rejects.toThrow(ValidationError);
    await expect(e.batch([{ type: 'x' }], {} as never)).rejects.toThrow(ValidationError);
    expect(await e.admin.listJobs({ limit: 10 })).toEqual([]);
  });
});

describe('engine.flow on the memory store', () => {
  it('runs a diamond in order; each node reads its parents in ctx.flow; a plain job has ctx.flow null', async () => {
    const store = new MemoryJobStore();
    const order: string[] = [];
    const seen: Record<string, unknown> = {};
    const handler = async (job: Job<{ n: number }>, ctx: JobContext) => {
      const node = ctx.flow?.node ?? 'plain';
      order.push(node);
      seen[node] = ctx.flow?.parents ?? null;
      return { node, n: job.payload.n };
    };
    const e = engine({ store, logger: quiet, pollIntervalMs: 25, handlers: { step: handler } });
    await e.start();
    const { id } = await e.flow({
      nodes: {
        a: { type: 'step', payload: { n: 1 } },
        b: { type: 'step', payload: { n: 2 }, dependsOn: ['a'] },
        c: { type: 'step', payload: { n: 3 }, dependsOn: ['a'] },
        d: { type: 'step', payload: { n: 4 }, dependsOn: ['b', 'c'] },
      },
    });
    const summary = await e.result(id, { timeoutMs: 10_000 });
    expect(summary).toEqual({
      status: 'completed',
      nodes: { a: 'completed', b: 'completed', c: 'completed', d: 'completed' },
    });
    expect(order[0]).toBe('a');
    expect(order[3]).toBe('d');
    expect(seen.d).toEqual({ b: { node: 'b', n: 2 }, c: { node: 'c', n: 3 } });
    const plain = await e.enqueue('step', { n: 0 });
    await e.result(plain.id, { timeoutMs: 10_000 });
    expect(seen.plain).toBeNull();
  });

  it('the flow job type is run by engines with handlers, not by an engine without any', async () => {
    const store = new MemoryJobStore();
    const idle = engine({ store, logger: quiet });
    const { id } = await idle.flow({ nodes: { a: { type: 'step' } } });
    const flowJob = await store.getJob(id);
    expect(flowJob?.type).toBe(FLOW_TYPE);
    const worker = engine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      handlers: { step: async () => 'ok' },
    });
    await worker.start();
    await waitFor(async () => (await store.getJob(id)) === null, 'the flow to end');
    expect((await worker.admin.getFlow(id))?.nodes[0]).toMatchObject({
      name: 'a',
      state: 'completed',
      result: 'ok',
    });
  });
});

describe('skips on the memory store', () => {
  it('a running flow shows a node skipped (with its reason) once its parent is dead-lettered, before the flow ends', async () => {
    const store = new MemoryJobStore();
    const e = engine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      // A cancel requested while the flow job runs reaches it at its next renewal (a third of
      // the lease): a short lease keeps that well inside the wait below.
      leaseMs: 1_000,
      retry: { kind: 'fixed', delayMs: 10 },
      handlers: {
        bad: async () => {
          throw new Error('bad on purpose');
        },
        step: async () => null,
      },
    });
    await e.start();
    // `far` has no handler: the flow stays running until it is cancelled.
    const { id } = await e.flow({
      nodes: {
        a: { type: 'bad', retries: 0 },
        b: { type: 'step', dependsOn: ['a'] },
        slow: { type: 'far' },
      },
    });
    let view = await e.admin.getFlow(id);
    await waitFor(async () => {
      view = await e.admin.getFlow(id);
      return view?.nodes[0]?.state === 'deadletter';
    }, 'node a to be dead-lettered');
    expect(view?.status).toBe('running');
    expect(view?.nodes[1]).toMatchObject({
      name: 'b',
      state: 'skipped',
      reason: 'skipped: parent a dead-lettered',
    });
    // The flow job may be running at this moment (woken by a node's end): its cancel is then a
    // request its run ends with; parked, it is cancelled at once. Either way it ends cancelled.
    expect(['cancelled', 'requested']).toContain(await e.admin.cancelFlow(id));
    await waitFor(
      async () => (await e.admin.getFlow(id))?.status === 'cancelled',
      'the flow to end cancelled',
    );
  });

  it("a cancelled node skips its dependent; a node with after: 'finished' still runs and reads the tally", async () => {
    const store = new MemoryJobStore();
    let ended: unknown = null;
    const e = engine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      handlers: {
        step: async () => 'ok',
        tally: async (_job: Job, ctx: JobContext) => {
          ended = ctx.flow?.ended;
        },
      },
    });
    await e.start();
    const { id } = await e.flow({
      nodes: {
        a: { type: 'far' },
        b: { type: 'step', dependsOn: ['a'] },
        x: { type: 'step' },
        end: { type: 'tally', dependsOn: ['a', 'b', 'x'], after: 'finished' },
      },
    });
    let aId: string | null = null;
    await waitFor(async () => {
      aId = (await e.admin.getFlow(id))?.nodes[0]?.jobId ?? null;
      return aId !== null;
    }, 'node a to start');
    await e.admin.cancel(aId as unknown as string);
    expect(await e.result(id, { timeoutMs: 10_000 })).toEqual({
      status: 'failed',
      nodes: { a: 'cancelled', b: 'skipped', x: 'completed', end: 'completed' },
    });
    expect(ended).toMatchObject({ completed: 1, deadlettered: 0, cancelled: 1, skipped: 1 });
    expect((ended as { failures: unknown[] }).failures).toEqual([
      { node: 'a', id: aId, outcome: 'cancelled', error: null },
      { node: 'b', id: null, outcome: 'skipped', error: null },
    ]);
  });
});
