import { spawn } from 'node:child_process';
import {
  CancelledError,
  type Job,
  JobEngine,
  type JobHistoryRecord,
  type JobRef,
  type JobStore,
  NotFoundError,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, waitFor } from '../harness.js';
import type { ProcessPeerSpec } from '../options.js';
import { runnerPath } from '../process-peer.js';

const WEEK = 7 * 24 * 3_600_000;
const error = { message: 'failed', stack: null };
/** Leases where a renewal must land in time on a loaded machine: at least 1 s. */
const LEASE_MS = 1_500;

type CancellingStore = JobStore & Required<Pick<JobStore, 'cancellation'>>;

/** The store with history keeping all outcomes, or the test skipped when it cannot cancel. */
async function cancellingStore(h: Harness, skip: (note: string) => void): Promise<CancellingStore> {
  const store = await h.open();
  if (!store.cancellation) skip('SKIPPED: the store has no `cancellation`');
  store.history?.configure({ keep: 'all', retentionMs: WEEK });
  return store as CancellingStore;
}

function skipWithoutProgress(store: JobStore, skip: (note: string) => void): void {
  if (!store.capabilities.progress) {
    skip('SKIPPED: the store has no capabilities.progress');
  }
}

async function historyOf(store: JobStore, id: string): Promise<JobHistoryRecord | null> {
  return store.history ? store.history.get(id) : null;
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
      expect(await store.cancellation.cancel(job.id), job.type).toBe('cancelled');
      await h.expectStored(store, job.id, null);
      if (store.history) {
        expect(await historyOf(store, job.id), job.type).toMatchObject({
          id: job.id,
          outcome: 'cancelled',
        });
      }
      expect(await store.cancellation.cancel(job.id), job.type).toBe(
        store.history ? 'finished' : 'not-found',
      );
    }
    expect(await store.cancellation.cancel('987654321')).toBe('not-found');
    expect(await store.cancellation.cancel('not-an-id')).toBe('not-found');
  });

  it('cancel flags a running job; renewal answers it; complete and fail leave it to cancelHeld, which ends it cancelled (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { owner: 'me', leaseMs: 60_000 });
    const ref = refOf(held as Job);
    expect(await store.cancellation.cancel(ref.id)).toBe('requested');
    await h.expectStored(store, ref.id, { state: 'running', cancelRequested: true });
    expect(await store.renewLeases('me', 60_000, [ref])).toEqual({
      lost: [],
      cancelRequested: [ref.id],
    });
    expect(await store.complete([ref])).toEqual({ lost: [], cancelRequested: [ref.id] });
    expect(await store.fail([{ ...ref, error, deadletter: false, retryDelayMs: 0 }])).toEqual({
      lost: [],
      cancelRequested: [ref.id],
    });
    await h.expectStored(store, ref.id, { state: 'running', cancelRequested: true });
    expect(await store.cancellation.cancelHeld([{ ...ref, token: 'stale' }])).toEqual({
      lost: [ref.id],
    });
    expect(await store.cancellation.cancelHeld([{ ...ref, durationMs: 42 }])).toEqual({ lost: [] });
    await h.expectStored(store, ref.id, null);
    if (store.history) {
      expect(await historyOf(store, (job as Job).id)).toMatchObject({
        outcome: 'cancelled',
        durationMs: 42,
        lockOwner: 'me',
      });
    }
    expect(await store.cancellation.cancelHeld([ref])).toEqual({ lost: [ref.id] });
  });

  it('a settle refused for a cancel request says cancelRequested, a stale token says lost, in one batch; the others are written (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    await enqueueJobs(store, [{}, {}, {}]);
    const held = await acquire(store, { owner: 'me', leaseMs: 60_000, limit: 3 });
    expect(held).toHaveLength(3);
    const [flagged, stale, plain] = (held as Job[]).map(refOf) as [JobRef, JobRef, JobRef];
    expect(await store.cancellation.cancel(flagged.id)).toBe('requested');
    const staleRef = { ...stale, token: 'not-the-token' };
    expect(await store.complete([flagged, staleRef, plain])).toEqual({
      lost: [stale.id],
      cancelRequested: [flagged.id],
    });
    await h.expectStored(store, plain.id, null);
    const failure = { error, deadletter: false, retryDelayMs: 0 };
    const failed = await store.fail([
      { ...flagged, ...failure },
      { ...staleRef, ...failure },
    ]);
    expect(failed).toEqual({ lost: [stale.id], cancelRequested: [flagged.id] });
    await h.expectStored(store, flagged.id, { state: 'running', cancelRequested: true });
    await h.expectStored(store, stale.id, { state: 'running' });
    if (store.completeAndAcquire) {
      const fused = await store.completeAndAcquire([flagged], {
        owner: 'me',
        limit: 1,
        leaseMs: 60_000,
        types: ['nothing-of-this-type'],
        queues: null,
        tenants: null,
      });
      expect({ lost: fused.lost, cancelRequested: fused.cancelRequested }).toEqual({
        lost: [],
        cancelRequested: [flagged.id],
      });
    }
    expect(await store.complete([{ ...flagged, id: '987654321' }])).toEqual({
      lost: ['987654321'],
    });
  });

  it('a cancel request outlives its owner: recovery ends the job cancelled (history outcome cancelled), never requeued nor dead-lettered, started or not (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    const jobs = await enqueueJobs(store, [{ retries: 2 }, { retries: 0 }, { retries: 1 }]);
    // Two started (a retried one, one with no retries left), one prefetched.
    const held = await acquire(store, { owner: 'crashed', leaseMs: 50, start: 2 });
    expect(held).toHaveLength(3);
    for (const job of held) expect(await store.cancellation.cancel(job.id)).toBe('requested');
    const ids = jobs.map((job) => job.id);
    const recovered = await waitFor(
      'the leases to expire and be recovered',
      async () => {
        const result = await store.recoverExpiredLeases(10);
        return (result.cancelled?.length ?? 0) > 0 ? result : undefined;
      },
      h.timeoutMs / 3,
    );
    expect([...(recovered.cancelled ?? [])].sort()).toEqual([...ids].sort());
    expect(recovered.requeued).toEqual([]);
    expect(recovered.deadlettered).toEqual([]);
    for (const id of ids) {
      await h.expectStored(store, id, null);
      if (store.history) {
        expect(await historyOf(store, id)).toMatchObject({
          outcome: 'cancelled',
          durationMs: null,
        });
      }
    }
    expect(await acquire(store, { owner: 'next' })).toEqual([]);
  });

  it('deleteJob of a running job is a cancel: the row stays, flagged, its scope slot taken until its owner lets go; deleteMany flags running jobs without counting them (capabilities.cancellation)', async ({
    skip,
  }) => {
    const store = await cancellingStore(h, skip);
    const [first, second] = await enqueueJobs(store, [
      { scope: 'acct', exclusive: true },
      { scope: 'acct', exclusive: true },
    ]);
    const [held] = await acquire(store);
    expect(held?.id).toBe((first as Job).id);
    expect(await store.deleteJob((first as Job).id)).toBe(true);
    expect(await store.getJob((first as Job).id)).toMatchObject({
      state: 'running',
      cancelRequested: true,
    });
    // The scope's slot stays taken: the next exclusive job of the scope does not start.
    expect(await acquire(store)).toEqual([]);
    // The owner's completion is refused; it ends the job as cancelled.
    expect(await store.complete([refOf(held as Job)])).toEqual({
      lost: [],
      cancelRequested: [(first as Job).id],
    });
    expect(await store.cancellation.cancelHeld([refOf(held as Job)])).toEqual({ lost: [] });
    const [next] = await acquire(store);
    expect(next?.id).toBe((second as Job).id);
    expect(await store.bulk?.deleteMany({ scope: 'acct' }, 100)).toBe(0);
    expect(await store.getJob((second as Job).id)).toMatchObject({
      state: 'running',
      cancelRequested: true,
    });
  });

  it(
    'a job cancelled while another owner held it ends cancelled, its handler never run: released, on the engine that acquires it; left to expire, by the recovery (capabilities.cancellation)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      const type = 'cancelled-elsewhere';
      const [released, stranded] = await enqueueJobs(store, [
        { type, retries: 3 },
        { type, retries: 3 },
      ]);
      const [leaving] = await acquire(store, { owner: 'leaving', types: [type], limit: 1 });
      const [crashed] = await acquire(store, {
        owner: 'crashed',
        types: [type],
        limit: 1,
        leaseMs: 50,
      });
      expect([leaving?.id, crashed?.id]).toEqual([(released as Job).id, (stranded as Job).id]);
      for (const job of [released, stranded] as Job[]) {
        expect(await store.cancellation.cancel(job.id)).toBe('requested');
      }
      // One owner gives its job back unstarted; the other dies and its lease runs out.
      expect(await store.release([refOf(leaving as Job)])).toEqual({ lost: [] });
      // The dead owner's lapsed lease: recovery ends that job cancelled at once.
      await waitFor(
        'the dead owner’s lease to be recovered',
        async () =>
          (await store.recoverExpiredLeases(10)).cancelled?.includes((stranded as Job).id),
        h.timeoutMs / 3,
      );
      await h.expectStored(store, (stranded as Job).id, null);
      // The one given back waits, flagged, for the next engine to take it.
      await h.expectStored(store, (released as Job).id, { state: 'async', cancelRequested: true });
      const workerStore = await h.peer(store);
      workerStore.history?.configure({ keep: 'all', retentionMs: WEEK });
      const started: string[] = [];
      const cancelled: string[] = [];
      const worker = new JobEngine({
        store: workerStore,
        leaseMs: LEASE_MS,
        handlers: { [type]: async (job) => void started.push(job.id) },
      });
      h.defer(() => worker.stop({ timeoutMs: 1_000 }));
      worker.on('cancelled', ({ job }) => cancelled.push(job.id));
      await worker.start();
      await waitFor(
        'the released job to end cancelled (or a handler to start)',
        async () => cancelled.length === 1 || started.length > 0,
        h.timeoutMs / 3,
      );
      expect(started, 'handlers run').toEqual([]);
      expect(cancelled).toEqual([(released as Job).id]);
      for (const job of [released, stranded] as Job[]) {
        await h.expectStored(store, job.id, null);
        if (store.history) expect((await historyOf(store, job.id))?.outcome).toBe('cancelled');
      }
    },
    h.timeout(),
  );

  it(
    'cancel racing complete on separate connections: exactly one outcome, the cancel wins only before the completion committed (capabilities.cancellation)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      const [canceller, completer] = await h.peers(store, 2);
      for (const peer of [canceller, completer]) {
        peer?.history?.configure({ keep: 'all', retentionMs: WEEK });
      }
      const seen = { completed: 0, cancelled: 0 };
      for (let round = 0; round < h.rounds * 2; round++) {
        const [job] = await enqueueJobs(store, [{}]);
        const [held] = await acquire(store, { owner: 'racer', leaseMs: 60_000 });
        const ref = refOf(held as Job);
        const [outcome, completion] = await Promise.all([
          (canceller as CancellingStore).cancellation.cancel(ref.id),
          (completer as JobStore).complete([{ ...ref, durationMs: 1 }]),
        ]);
        const completed = completion.lost.length === 0 && !completion.cancelRequested;
        if (completed) {
          // The completion committed first: the cancel found the job finished.
          expect(outcome, `round ${round}`).toBe(store.history ? 'finished' : 'not-found');
          seen.completed += 1;
        } else {
          // The cancel request committed first: the completion was refused, the owner cancels.
          expect(outcome, `round ${round}`).toBe('requested');
          expect(completion, `round ${round}`).toEqual({ lost: [], cancelRequested: [ref.id] });
          expect(await store.cancellation.cancelHeld([ref])).toEqual({ lost: [] });
          seen.cancelled += 1;
        }
        await h.expectStored(store, ref.id, null);
        if (store.history) {
          expect((await historyOf(store, (job as Job).id))?.outcome, `round ${round}`).toBe(
            completed ? 'completed' : 'cancelled',
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
    store.history?.configure({ keep: 'all', retentionMs: WEEK });
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
    if (store.history) {
      expect((await store.history.get(ref.id))?.progress).toBe('almost');
    }
  });

  it(
    'a cancel reaches a handler running on an engine of another connection at its next renewal: CancelledError, ended cancelled, never run again (capabilities.cancellation)',
    async ({ skip }) => {
      const store = await cancellingStore(h, skip);
      const workerStore = await h.peer(store);
      workerStore.history?.configure({ keep: 'all', retentionMs: WEEK });
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
      if (store.history) {
        expect(await historyOf(store, job.id)).toMatchObject({
          outcome: 'cancelled',
          progress: { started: true },
        });
      }
      // Ended: `finished` where history remembers it; on a store without history the store
      // answers `not-found`, which the admin API reports as a NotFoundError.
      if (store.history) expect(await client.admin.cancel(job.id)).toBe('finished');
      else {
        expect(await store.cancellation.cancel(job.id)).toBe('not-found');
        await expect(client.admin.cancel(job.id)).rejects.toBeInstanceOf(NotFoundError);
      }
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
      if (store.history) {
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
      if (store.history) {
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
      expect(await Promise.all(ids.map((id) => store.cancellation.cancel(id)))).toEqual(
        ids.map(() => 'requested'),
      );
      for (const id of ids) {
        const aborted = await child.waitFor('aborted', id, LEASE_MS);
        expect(aborted.reason, id).toBe('CancelledError');
      }
      for (const id of ids) {
        await waitFor(`job ${id} to end`, async () => (await store.getJob(id)) === null, LEASE_MS);
        if (!store.history) continue;
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
    'progress written in a process that crashed survives it; its lapsed cancelled job ends cancelled with that progress, never to start again (needs processPeer, capabilities.cancellation)',
    async (ctx) => {
      const store = await cancellingStore(h, ctx.skip);
      skipWithoutProgress(store, ctx.skip);
      const spec = h.processPeerOrSkip(store, ctx);
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
      expect(await store.cancellation.cancel(id)).toBe('requested');
      // The dead owner's lease runs out: recovery ends the job cancelled, its progress kept.
      await waitFor(
        'the lease to be recovered',
        async () => (await store.recoverExpiredLeases(10)).cancelled?.includes(id),
        h.timeoutMs / 3,
      );
      // Gone from the live table: no engine can ever start it again.
      expect(await reopened.getJob(id)).toBeNull();
      if (store.history) {
        expect(await historyOf(store, id)).toMatchObject({
          outcome: 'cancelled',
          progress: written,
        });
      }
    },
    h.timeout(),
  );
}
