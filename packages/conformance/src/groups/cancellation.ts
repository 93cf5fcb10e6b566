import { spawn } from 'node:child_process';
import {
  CancelledError,
  type Job,
  JobEngine,
  type JobHistoryRecord,
  type JobStore,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, waitFor } from '../harness.js';
import type { ProcessPeerSpec } from '../options.js';
import { runnerPath } from '../process-peer.js';

const WEEK = 7 * 24 * 3_600_000;
const error = { message: 'failed', stack: null };
/** Leases where a renewal must land in time on a loaded machine: at least 1 s. */
const LEASE_MS = 1_500;

type CancellingStore = JobStore & Required<Pick<JobStore, 'cancel' | 'cancelHeld'>>;

/** The store with history keeping all outcomes, or the test skipped when it cannot cancel. */
async function cancellingStore(h: Harness, skip: (note: string) => void): Promise<CancellingStore> {
  const store = await h.open();
  if (!store.capabilities.cancellation || !store.cancel || !store.cancelHeld) {
    skip('SKIPPED: the store has no capabilities.cancellation (cancel, cancelHeld)');
  }
  store.configureHistory?.({ keep: 'all', retentionMs: WEEK });
  return store as CancellingStore;
}

function skipWithoutProgress(store: JobStore, skip: (note: string) => void): void {
  if (!store.capabilities.progress) {
    skip('SKIPPED: the store has no capabilities.progress');
  }
}

async function historyOf(store: JobStore, id: string): Promise<JobHistoryRecord | null> {
  return store.getHistory ? store.getHistory(id) : null;
}

/** A child process running an engine whose handler reports progress until it is cancelled. */
function spawnCancelPeer(spec: ProcessPeerSpec, config: { type: string; leaseMs: number }) {
  const payload = JSON.stringify({ module: spec.module, args: spec.args ?? null, ...config });
  const child = spawn(
    process.execPath,
    [...(spec.nodeArgs ?? []), runnerPath('cancel-peer.mjs'), payload],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: Record<string, unknown>[] = [];
  let buffered = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const line of parts) if (line.startsWith('{')) lines.push(JSON.parse(line));
  });
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const seen = (key: string, id?: string) =>
    lines.find((line) => key in line && (id === undefined || line[key] === id));
  return {
    seen,
    /** How many lines with `key` the child printed. */
    count: (key: string) => lines.filter((line) => key in line).length,
    /** Waits for a line with `key` (and value `id`), failing with the child's stderr. */
    async waitFor(key: string, id: string | undefined, timeoutMs: number) {
      await waitFor(
        `the child process to print "${key}" (stderr: ${stderr.trim().slice(0, 500)})`,
        async () => seen(key, id) !== undefined || child.exitCode !== null,
        timeoutMs,
      );
      const line = seen(key, id);
      if (!line) throw new Error(`cancel peer exited early: ${stderr.trim()}`);
      return line;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * Cancellation and progress (invariant 20): an operator's cancel removes a waiting job at once
 * and reaches a running one through its owner's lease renewal, on every store; progress rides
 * on the renewal and survives its writer.
 */
export function cancellationGroup(h: Harness): void {
  it('cancel removes timer, async, suspended and dead-letter jobs at once with history outcome cancelled; again it says finished (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    const [later, now, parked, dead] = await enqueueJobs(store, [
      { type: 'later', delayMs: 60_000 },
      { type: 'now' },
      { type: 'parked' },
      { type: 'dead', retries: 0 },
    ]);
    await store.suspend({ type: 'parked' });
    const [held] = await acquire(store, { types: ['dead'] });
    await store.fail([{ ...refOf(held as Job), error, deadletter: true, retryDelayMs: 0 }]);
    for (const job of [later, now, parked, dead] as Job[]) {
      expect(await store.cancel(job.id), job.type).toBe('cancelled');
      await h.expectStored(store, job.id, null);
      if (store.getHistory) {
        expect(await historyOf(store, job.id), job.type).toMatchObject({
          id: job.id,
          outcome: 'cancelled',
        });
      }
      expect(await store.cancel(job.id), job.type).toBe(
        store.getHistory ? 'finished' : 'not-found',
      );
    }
    expect(await store.cancel('987654321')).toBe('not-found');
    expect(await store.cancel('not-an-id')).toBe('not-found');
  });

  it('cancel flags a running job; renewal answers it; complete and fail leave it to cancelHeld, which ends it cancelled (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { owner: 'me', leaseMs: 60_000 });
    const ref = refOf(held as Job);
    expect(await store.cancel(ref.id)).toBe('requested');
    await h.expectStored(store, ref.id, { state: 'running', cancelRequested: true });
    expect(await store.renewLeases('me', 60_000, [ref])).toEqual({
      lost: [],
      cancelRequested: [ref.id],
    });
    expect(await store.complete([ref])).toEqual({ lost: [ref.id] });
    expect(await store.fail([{ ...ref, error, deadletter: false, retryDelayMs: 0 }])).toEqual({
      lost: [ref.id],
    });
    await h.expectStored(store, ref.id, { state: 'running', cancelRequested: true });
    expect(await store.cancelHeld([{ ...ref, token: 'stale' }])).toEqual({ lost: [ref.id] });
    expect(await store.cancelHeld([{ ...ref, durationMs: 42 }])).toEqual({ lost: [] });
    await h.expectStored(store, ref.id, null);
    if (store.getHistory) {
      expect(await historyOf(store, (job as Job).id)).toMatchObject({
        outcome: 'cancelled',
        durationMs: 42,
        lockOwner: 'me',
      });
    }
    expect(await store.cancelHeld([ref])).toEqual({ lost: [ref.id] });
  });

  it('a cancel request outlives its owner: recovery keeps it (the next owner cancels at once), and an operator retry of a dead job drops it (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    const [again, dead] = await enqueueJobs(store, [{ retries: 2 }, { retries: 0 }]);
    const held = await acquire(store, { owner: 'crashed', leaseMs: 50 });
    expect(held).toHaveLength(2);
    for (const job of held) expect(await store.cancel(job.id)).toBe('requested');
    const recovered = await waitFor(
      'the leases to expire and be recovered',
      async () => {
        const result = await store.recoverExpiredLeases(10);
        return result.requeued.length + result.deadlettered.length > 0 ? result : undefined;
      },
      h.timeoutMs / 3,
    );
    expect(recovered).toEqual({ requeued: [(again as Job).id], deadlettered: [(dead as Job).id] });
    await h.expectStored(store, (again as Job).id, { state: 'async', cancelRequested: true });
    const [next] = await acquire(store, { owner: 'next' });
    expect(next).toMatchObject({ id: (again as Job).id, cancelRequested: true });
    expect(await store.cancelHeld([refOf(next as Job)])).toEqual({ lost: [] });
    await h.expectStored(store, (dead as Job).id, { state: 'deadletter', cancelRequested: true });
    await store.retryDeadletter((dead as Job).id, 1);
    await h.expectStored(store, (dead as Job).id, { state: 'async', cancelRequested: false });
  });

  it(
    'cancel racing complete on separate connections: exactly one outcome, the cancel wins only before the completion committed (capabilities.cancellation)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      const [canceller, completer] = await h.peers(store, 2);
      for (const peer of [canceller, completer]) {
        peer?.configureHistory?.({ keep: 'all', retentionMs: WEEK });
      }
      const seen = { completed: 0, cancelled: 0 };
      for (let round = 0; round < h.rounds * 2; round++) {
        const [job] = await enqueueJobs(store, [{}]);
        const [held] = await acquire(store, { owner: 'racer', leaseMs: 60_000 });
        const ref = refOf(held as Job);
        const [outcome, completion] = await Promise.all([
          (canceller as CancellingStore).cancel(ref.id),
          (completer as JobStore).complete([{ ...ref, durationMs: 1 }]),
        ]);
        if (completion.lost.length === 0) {
          // The completion committed first: the cancel found the job finished.
          expect(outcome, `round ${round}`).toBe(store.getHistory ? 'finished' : 'not-found');
          seen.completed += 1;
        } else {
          // The cancel request committed first: the completion was refused, the owner cancels.
          expect(outcome, `round ${round}`).toBe('requested');
          expect(await store.cancelHeld([ref])).toEqual({ lost: [] });
          seen.cancelled += 1;
        }
        await h.expectStored(store, ref.id, null);
        if (store.getHistory) {
          expect((await historyOf(store, (job as Job).id))?.outcome, `round ${round}`).toBe(
            completion.lost.length === 0 ? 'completed' : 'cancelled',
          );
        }
      }
      expect(seen.completed + seen.cancelled).toBe(h.rounds * 2);
    },
    h.raceTimeout(),
  );

  it('renewLeases writes progress in the same call; another connection reads it; it goes to history (capabilities.progress)', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutProgress(store, skip);
    store.configureHistory?.({ keep: 'all', retentionMs: WEEK });
    const [job] = await enqueueJobs(store, [{}]);
    expect(job?.progress ?? null).toBeNull();
    const [held] = await acquire(store, { owner: 'me', leaseMs: 60_000 });
    const ref = refOf(held as Job);
    const reader = await h.peer(store);
    const progress = { done: 3, total: 7, note: 'naïve ✓ "quoted"' };
    expect(
      await store.renewLeases('me', 60_000, [{ ...ref, progressJson: JSON.stringify(progress) }]),
    ).toEqual({ lost: [] });
    expect((await reader.getJob(ref.id))?.progress).toEqual(progress);
    await h.expectStored(store, ref.id, { progress });
    // Without progressJson the stored value stays; a bare JSON string is kept as a string.
    await store.renewLeases('me', 60_000, [ref]);
    expect((await reader.getJob(ref.id))?.progress).toEqual(progress);
    await store.renewLeases('me', 60_000, [{ ...ref, progressJson: '"almost"' }]);
    expect((await store.getJob(ref.id))?.progress).toBe('almost');
    // A stale holder writes nothing.
    await store.renewLeases('me', 60_000, [{ ...ref, token: 'stale', progressJson: '1' }]);
    expect((await reader.getJob(ref.id))?.progress).toBe('almost');
    expect((await store.complete([ref])).lost).toEqual([]);
    if (store.getHistory) {
      expect((await store.getHistory(ref.id))?.progress).toBe('almost');
    }
  });

  it(
    'a cancel reaches a handler running on an engine of another connection at its next renewal: CancelledError, ended cancelled, never run again (capabilities.cancellation)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      const workerStore = await h.peer(store);
      workerStore.configureHistory?.({ keep: 'all', retentionMs: WEEK });
      const runs: string[] = [];
      const reasons: unknown[] = [];
      const worker = new JobEngine({
        store: workerStore,
        leaseMs: LEASE_MS,
        handlers: {
          long: async (job, ctx) => {
            runs.push(job.id);
            ctx.progress({ started: true });
            await new Promise<void>((resolve) =>
              ctx.signal.addEventListener('abort', () => resolve()),
            );
            reasons.push(ctx.signal.reason);
            throw ctx.signal.reason;
          },
        },
      });
      h.defer(() => worker.stop({ timeoutMs: 1_000 }));
      const cancelled: string[] = [];
      worker.on('cancelled', ({ job }) => cancelled.push(job.id));
      await worker.start();
      const client = new JobEngine({ store });
      const job = await client.enqueue('long', {}, { retries: 3 });
      await waitFor('the handler to start', async () => runs.length === 1, h.timeoutMs / 3);
      expect(await client.admin.cancel(job.id)).toBe('requested');
      // Within a heartbeat (leaseMs / 3) on an unloaded machine; bounded here by one lease,
      // before which the job could not have moved to anyone else.
      await waitFor('the handler to be aborted', async () => reasons.length === 1, LEASE_MS);
      expect(reasons[0]).toBeInstanceOf(CancelledError);
      await waitFor(
        'the job to end cancelled',
        async () => cancelled.length === 1,
        h.timeoutMs / 3,
      );
      await h.expectStored(store, job.id, null);
      if (store.getHistory) {
        expect(await historyOf(store, job.id)).toMatchObject({
          outcome: 'cancelled',
          progress: { started: true },
        });
      }
      expect(await client.admin.cancel(job.id)).toBe('finished');
      expect(runs).toEqual([job.id]);
    },
    h.timeout(),
  );

  it(
    'a handler that returns before its renewal tells it of a cancel still ends cancelled: the store refuses the completion (capabilities.cancellation)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started = false;
      const worker = new JobEngine({
        store,
        leaseMs: LEASE_MS,
        handlers: {
          quick: async () => {
            started = true;
            await gate;
            return { done: true };
          },
        },
      });
      h.defer(() => worker.stop({ timeoutMs: 1_000 }));
      const ended: string[] = [];
      worker.on('cancelled', () => ended.push('cancelled'));
      worker.on('completed', () => ended.push('completed'));
      await worker.start();
      const job = await worker.enqueue('quick', {});
      await waitFor('the handler to start', async () => started, h.timeoutMs / 3);
      expect(await worker.admin.cancel(job.id)).toBe('requested');
      release();
      await waitFor('the job to end', async () => ended.length > 0, h.timeoutMs / 3);
      expect(ended).toEqual(['cancelled']);
      await h.expectStored(store, job.id, null);
      if (store.getHistory) {
        expect((await historyOf(store, job.id))?.outcome).toBe('cancelled');
      }
    },
    h.timeout(),
  );

  it(
    'ctx.transaction of a job cancelled meanwhile rolls back and throws CancelledError; the job ends cancelled (capabilities.cancellation, completeInTransaction)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      if (!store.completeInTransaction) skip('SKIPPED: the store has no completeInTransaction');
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started = false;
      const errors: unknown[] = [];
      const worker = new JobEngine({
        store,
        leaseMs: LEASE_MS,
        handlers: {
          tx: async (_job, ctx) => {
            started = true;
            await gate;
            try {
              await ctx.transaction(async () => 'written');
            } catch (error) {
              errors.push(error);
              throw error;
            }
          },
        },
      });
      h.defer(() => worker.stop({ timeoutMs: 1_000 }));
      const ended: string[] = [];
      worker.on('cancelled', () => ended.push('cancelled'));
      worker.on('completed', () => ended.push('completed'));
      await worker.start();
      const job = await worker.enqueue('tx', {});
      await waitFor('the handler to start', async () => started, h.timeoutMs / 3);
      expect(await worker.admin.cancel(job.id)).toBe('requested');
      release();
      await waitFor('the job to end', async () => ended.length > 0, h.timeoutMs / 3);
      expect(ended).toEqual(['cancelled']);
      expect(errors[0]).toBeInstanceOf(CancelledError);
      await h.expectStored(store, job.id, null);
      if (store.getHistory) {
        expect((await historyOf(store, job.id))?.outcome).toBe('cancelled');
      }
    },
    h.timeout(),
  );

  it(
    'cancels reach 4 handlers in another process at its next lease renewal, well inside one lease; their progress is readable meanwhile (needs processPeer, capabilities.cancellation)',
    async (ctx) => {
      const store = await cancellingStore(h, ctx.skip);
      const spec = h.processPeerOrSkip(store, ctx);
      if (!spec) return;
      const child = spawnCancelPeer(spec, { type: 'remote', leaseMs: LEASE_MS });
      h.defer(() => child.kill());
      await child.waitFor('ready', undefined, h.timeoutMs / 2);
      // The child runs 4 at once: each is cancelled from here while it runs there.
      const ids = (
        await enqueueJobs(
          store,
          Array.from({ length: 4 }, () => ({ type: 'remote', retries: 3 })),
        )
      ).map((job) => job.id);
      for (const id of ids) await child.waitFor('progress', id, h.timeoutMs / 3);
      for (const id of ids) {
        await waitFor(
          `the heartbeat to write the progress of job ${id}`,
          async () => ((await store.getJob(id))?.progress as { step?: number } | null)?.step,
          LEASE_MS * 2,
        );
      }
      expect(await Promise.all(ids.map((id) => store.cancel(id)))).toEqual(
        ids.map(() => 'requested'),
      );
      for (const id of ids) {
        const aborted = await child.waitFor('aborted', id, LEASE_MS);
        expect(aborted.reason, id).toBe('CancelledError');
      }
      for (const id of ids) {
        await waitFor(`job ${id} to end`, async () => (await store.getJob(id)) === null, LEASE_MS);
        if (!store.getHistory) continue;
        const record = await historyOf(store, id);
        expect(record?.outcome, id).toBe('cancelled');
        expect((record?.progress as { step?: number } | null | undefined)?.step).toBeGreaterThan(0);
      }
      // Never started again: each started once in the child.
      expect(child.count('started')).toBe(ids.length);
    },
    h.timeout(),
  );

  it(
    'progress written in a process that crashed survives it; the cancelled job is never started again (needs processPeer, capabilities.cancellation)',
    async (ctx) => {
      const store = await cancellingStore(h, ctx.skip);
      skipWithoutProgress(store, ctx.skip);
      const spec = h.processPeerOrSkip(store, ctx);
      if (!spec) return;
      const child = spawnCancelPeer(spec, { type: 'crashy', leaseMs: 1_000 });
      h.defer(() => child.kill());
      await child.waitFor('ready', undefined, h.timeoutMs / 2);
      const [job] = await enqueueJobs(store, [{ type: 'crashy', retries: 3 }]);
      const id = (job as Job).id;
      await waitFor(
        'the heartbeat to write progress',
        async () => ((await store.getJob(id))?.progress as { step?: number } | null)?.step,
        h.timeoutMs / 3,
      );
      await child.kill();
      const reopened = await h.peer(store);
      const written = (await reopened.getJob(id))?.progress as { step: number };
      expect(written.step).toBeGreaterThan(0);
      expect(await store.cancel(id)).toBe('requested');
      // The dead owner's lease runs out; the job is requeued with its progress and its flag.
      await waitFor(
        'the lease to be recovered',
        async () => (await store.recoverExpiredLeases(10)).requeued.includes(id),
        h.timeoutMs / 3,
      );
      expect(await reopened.getJob(id)).toMatchObject({ progress: written, cancelRequested: true });
      const started: string[] = [];
      const engine = new JobEngine({
        store: reopened,
        leaseMs: LEASE_MS,
        handlers: { crashy: (j) => void started.push(j.id) },
      });
      h.defer(() => engine.stop({ timeoutMs: 1_000 }));
      const cancelled: string[] = [];
      engine.on('cancelled', ({ job: j }) => cancelled.push(j.id));
      reopened.configureHistory?.({ keep: 'all', retentionMs: WEEK });
      await engine.start();
      await waitFor(
        'the job to end cancelled',
        async () => cancelled.length === 1,
        h.timeoutMs / 3,
      );
      expect(started).toEqual([]);
      if (store.getHistory) {
        expect(await historyOf(store, id)).toMatchObject({
          outcome: 'cancelled',
          progress: written,
        });
      }
    },
    h.timeout(),
  );
}
