/**
 * Flows and batches (`engine.flow`, `engine.batch`, on the abilities `steps` and `waits`): a
 * diamond runs in dependency order and its last node reads its parents' results; a
 * dead-lettered node skips its dependents, transitively, and not the rest; a cycle or an unknown
 * parent is refused with nothing written; a flow enqueued in a caller's transaction that rolls
 * back never exists; a batch's callback runs once, after every item ended, with the counts and
 * the failure; `admin.getFlow` shows a running and a finished flow, and `admin.cancelFlow`
 * cancels the unfinished nodes. Real engines, short waits. Skipped by name without
 * `steps`/`waits` (and `cancellation`, `history` or transactions for the tests that need them).
 */
import {
  FLOW_TYPE,
  type FlowView,
  type Job,
  type JobContext,
  JobEngine,
  type JobStore,
  ValidationError,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { type Harness, waitFor } from '../harness.js';
import { startEngine } from './waits.js';

type Skip = (note: string) => never;

async function openWithFlows(h: Harness, skip: Skip): Promise<JobStore> {
  const store: JobStore = await h.open();
  if (!store.steps || !store.waits) skip('SKIPPED: the store has no `steps` and `waits`');
  return store;
}

/** A node type that fails for good (no retries). */
const failing = async (): Promise<never> => {
  throw new Error('node failed on purpose');
};

export function flowsGroup(h: Harness): void {
  it('a diamond a → b, c → d runs in dependency order: d starts once b and c completed and reads their results; the flow completes', async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    const started: string[] = [];
    let atD: FlowView | null = null;
    let parentsOfD: Record<string, unknown> | null = null;
    const engine = await startEngine(h, store, {
      history: { keep: 'all' },
      handlers: {
        step: async (job: Job<{ n: number }>, ctx: JobContext) => {
          const node = ctx.flow?.node as string;
          started.push(node);
          if (node === 'd') {
            atD = await engine.admin.getFlow(ctx.flow?.id as string);
            parentsOfD = ctx.flow?.parents ?? null;
          }
          return { node, twice: job.payload.n * 2 };
        },
      },
    });
    const { id } = await engine.flow({
      nodes: {
        a: { type: 'step', payload: { n: 1 } },
        b: { type: 'step', payload: { n: 2 }, dependsOn: ['a'] },
        c: { type: 'step', payload: { n: 3 }, dependsOn: ['a'] },
        d: { type: 'step', payload: { n: 4 }, dependsOn: ['b', 'c'] },
      },
    });
    expect(await engine.result(id, { timeoutMs: 20_000 })).toEqual({
      status: 'completed',
      nodes: { a: 'completed', b: 'completed', c: 'completed', d: 'completed' },
    });
    expect(started[0]).toBe('a');
    expect([...started.slice(1, 3)].sort()).toEqual(['b', 'c']);
    expect(started[3]).toBe('d');
    expect(started).toHaveLength(4);
    const states = Object.fromEntries(
      ((atD as FlowView | null)?.nodes ?? []).map((n) => [n.name, n.state]),
    );
    expect(states).toEqual({ a: 'completed', b: 'completed', c: 'completed', d: 'running' });
    expect(parentsOfD).toEqual({ b: { node: 'b', twice: 4 }, c: { node: 'c', twice: 6 } });
  });

  it('a fast branch is not held back by a slow one: a node starts once its own parents completed, while a sibling branch still waits', async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    if (!store.cancellation)
      skip('SKIPPED: the store has no `cancellation` (the flow is cancelled at the end)');
    const ran: string[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        step: async (_job: Job, ctx: JobContext) => void ran.push(ctx.flow?.node as string),
      },
    });
    // `far` is a type no engine runs: that branch waits until the test cancels the flow. The
    // recheck is far beyond the wait below, so only the settler's wake-up can start `d`.
    const { id } = await engine.flow({
      nodes: {
        a: { type: 'step' },
        slow: { type: 'far', dependsOn: ['a'] },
        c: { type: 'step', dependsOn: ['a'] },
        d: { type: 'step', dependsOn: ['c'] },
      },
    });
    const view = await waitFor('node d to complete', async () => {
      const read = await engine.admin.getFlow(id);
      return read?.nodes.find((n) => n.name === 'd')?.state === 'completed' ? read : undefined;
    });
    expect(view.status).toBe('running');
    expect(view.nodes.find((n) => n.name === 'slow')?.state).toBe('async');
    expect(ran).toEqual(['a', 'c', 'd']);
    await engine.admin.cancelFlow(id);
  });

  it('a dead-lettered node skips its dependents, transitively (never started, recorded skipped with the reason); the other branch runs; the flow ends failed', async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    if (!store.history)
      skip('SKIPPED: the store has no `history` (the finished flow is read there)');
    const ran: string[] = [];
    const engine = await startEngine(h, store, {
      history: { keep: 'all' },
      handlers: {
        ok: async (_job: Job, ctx: JobContext) => void ran.push(ctx.flow?.node as string),
        bad: failing,
      },
    });
    const { id } = await engine.flow({
      nodes: {
        a: { type: 'bad', retries: 0 },
        b: { type: 'ok', dependsOn: ['a'] },
        c: { type: 'ok', dependsOn: ['b'] },
        x: { type: 'ok' },
        y: { type: 'ok', dependsOn: ['x'] },
      },
    });
    expect(await engine.result(id, { timeoutMs: 20_000 })).toEqual({
      status: 'failed',
      nodes: { a: 'deadletter', b: 'skipped', c: 'skipped', x: 'completed', y: 'completed' },
    });
    expect(ran.sort()).toEqual(['x', 'y']);
    const view = (await engine.admin.getFlow(id)) as FlowView;
    expect(view.status).toBe('failed');
    const byName = Object.fromEntries(view.nodes.map((n) => [n.name, n]));
    expect(byName.a).toMatchObject({
      state: 'deadletter',
      error: { message: 'node failed on purpose' },
    });
    expect(byName.a?.jobId).toEqual(expect.any(String));
    expect(byName.b).toMatchObject({
      state: 'skipped',
      jobId: null,
      reason: 'skipped: parent a dead-lettered',
    });
    expect(byName.c).toMatchObject({
      state: 'skipped',
      jobId: null,
      reason: 'skipped: parent b skipped',
    });
  });

  it('a cycle or an unknown parent is refused with a ValidationError naming the node, and nothing is written', async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    const engine = await startEngine(h, store, { handlers: { step: async () => null } });
    const cycle = await engine
      .flow({
        nodes: {
          a: { type: 'step', dependsOn: ['c'] },
          b: { type: 'step', dependsOn: ['a'] },
          c: { type: 'step', dependsOn: ['b'] },
        },
      })
      .catch((error: unknown) => error);
    expect(cycle).toBeInstanceOf(ValidationError);
    expect((cycle as ValidationError).message).toContain('form a cycle');
    const unknown = await engine
      .flow({ nodes: { a: { type: 'step' }, b: { type: 'step', dependsOn: ['z'] } } })
      .catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(ValidationError);
    expect((unknown as ValidationError).field).toBe('nodes.b.dependsOn');
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it("a flow enqueued in the caller's transaction never exists when it rolls back, and runs when it commits", async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    if (!h.options.transaction || !store.capabilities.transactionalEnqueue) {
      skip('SKIPPED: the store has no transactional enqueue (options.transaction)');
    }
    const hooks = h.options.transaction as NonNullable<Harness['options']['transaction']>;
    const ran: string[] = [];
    // Enqueued through an engine that is not started: on SQLite a polling engine's write would
    // wait for the open transaction's lock, blocking the process that holds it.
    const client = new JobEngine({ store });
    const nodes = { a: { type: 'step' }, b: { type: 'step', dependsOn: ['a'] } };
    const rolledBack = await hooks.begin(store);
    let rolledBackId: string;
    try {
      rolledBackId = (await client.flow({ nodes }, { tx: rolledBack })).id;
    } finally {
      await hooks.rollback(rolledBack);
    }
    // Read before the next flow: a store with sequential ids gives that one the same id.
    expect(await store.getJob(rolledBackId)).toBeNull();
    expect(await client.admin.getFlow(rolledBackId)).toBeNull();
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    const committed = await hooks.begin(store);
    let committedId: string;
    try {
      committedId = (await client.flow({ nodes }, { tx: committed })).id;
    } catch (error) {
      await hooks.rollback(committed);
      throw error;
    }
    await hooks.commit(committed);
    const engine = await startEngine(h, store, {
      handlers: {
        step: async (_job: Job, ctx: JobContext) => void ran.push(ctx.flow?.node as string),
      },
    });
    await engine.result(committedId, { timeoutMs: 20_000 });
    // Each node once: the rolled-back flow never ran.
    expect(ran).toEqual(['a', 'b']);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it("a batch's callback runs once, after every item ended, with the counts and the failure", async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    const callbacks: unknown[] = [];
    const itemsEnded: string[] = [];
    let endedAtCallback: number | null = null;
    const engine = await startEngine(h, store, {
      handlers: {
        item: async (job: Job<{ i: number }>) => {
          itemsEnded.push(String(job.payload.i));
          return job.payload.i;
        },
        bad: failing,
        done: async (job: Job, ctx: JobContext) => {
          endedAtCallback = itemsEnded.length;
          callbacks.push({ payload: job.payload, ended: ctx.flow?.ended, node: ctx.flow?.node });
        },
      },
    });
    const items = [
      ...Array.from({ length: 5 }, (_, i) => ({ type: 'item', payload: { i } })),
      { type: 'bad', retries: 0 },
    ];
    const { id } = await engine.batch(items, { callback: { type: 'done', payload: { album: 7 } } });
    await engine.result(id, { timeoutMs: 20_000 });
    expect(endedAtCallback).toBe(5);
    expect(callbacks).toHaveLength(1);
    const [call] = callbacks as Array<{
      payload: unknown;
      node: string;
      ended: Record<string, unknown>;
    }>;
    expect(call?.payload).toEqual({ album: 7 });
    expect(call?.node).toBe('callback');
    expect(call?.ended).toMatchObject({ completed: 5, deadlettered: 1, cancelled: 0, skipped: 0 });
    expect(call?.ended.failures).toEqual([
      {
        node: '5',
        id: expect.any(String),
        outcome: 'deadletter',
        error: expect.objectContaining({ message: 'node failed on purpose' }),
      },
    ]);
  });

  it('admin.getFlow shows a running flow (nodes pending, waiting, completed) and admin.cancelFlow cancels its unfinished nodes; nodes not started never start', async ({
    skip,
  }) => {
    const store = await openWithFlows(h, skip);
    if (!store.cancellation) skip('SKIPPED: the store has no `cancellation`');
    const ran: string[] = [];
    const engine = await startEngine(h, store, {
      // A cancel requested while the flow job runs reaches it at its next renewal (a third of
      // the lease): a short lease keeps that well inside the wait below.
      leaseMs: 1_000,
      handlers: {
        step: async (_job: Job, ctx: JobContext) => void ran.push(ctx.flow?.node as string),
      },
    });
    // `far` is a type no engine runs: the flow stays at it until the test acts.
    const { id } = await engine.flow({
      nodes: {
        a: { type: 'step' },
        b: { type: 'far', dependsOn: ['a'] },
        c: { type: 'step', dependsOn: ['b'] },
      },
    });
    const view = await waitFor('node b to be enqueued', async () => {
      const read = await engine.admin.getFlow(id);
      return read?.nodes[1]?.jobId ? read : undefined;
    });
    expect(view.status).toBe('running');
    expect(view.nodes.map((n) => [n.name, n.state])).toEqual([
      ['a', 'completed'],
      ['b', 'async'],
      ['c', 'pending'],
    ]);
    expect(view.nodes[2]).toMatchObject({ type: 'step', dependsOn: ['b'], jobId: null });
    const bId = view.nodes[1]?.jobId as string;
    expect((await store.getJob(id))?.type).toBe(FLOW_TYPE);
    // The flow job parks right after it checkpointed b: a cancel that lands before is a request
    // its run ends with, one after cancels it at once. Either way b is gone and the flow ends.
    expect(['cancelled', 'requested']).toContain(await engine.admin.cancelFlow(id));
    expect(await store.getJob(bId)).toBeNull();
    await waitFor('the flow job to be gone', async () => (await store.getJob(id)) === null);
    expect(ran).toEqual(['a']);
    if (store.history) {
      expect((await engine.admin.getFlow(id))?.status).toBe('cancelled');
    }
    await expect(engine.admin.cancelFlow(bId)).rejects.toThrow(/flow/);
  });
}
