/**
 * The typed job map (`JobEngine<Jobs>`): handlers get their payload and return their result,
 * `enqueue` refuses an unknown type or a wrong payload, `result` says what the handler returned.
 * Checked by the type checker (`pnpm typecheck` compiles this file; each `@ts-expect-error`
 * fails the build when the line it marks compiles) and run once to prove it works.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { type Job, JobEngine, MemoryJobStore } from '../src/index.js';
import { engine, waitFor } from './helpers.js';

interface Jobs {
  'send-email': { payload: { to: string }; result: { messageId: string } };
  report: { payload: { month: string } };
  ping: { payload?: undefined };
}

describe('a typed job map', () => {
  it('types handlers, enqueue and result, and refuses typos and wrong payloads at compile time', async () => {
    const store = new MemoryJobStore();
    store.history.configure({ keep: 'all', retentionMs: 60_000 });
    const typed = new JobEngine<Jobs>({
      store,
      handlers: {
        'send-email': async (job) => {
          expectTypeOf(job.payload).toEqualTypeOf<{ to: string }>();
          return { messageId: `m-${job.payload.to}` };
        },
        report: async (job, ctx) => {
          expectTypeOf(job.payload.month).toBeString();
          // A step's result has its function's type; a transaction step's tx the type asked for.
          expectTypeOf(await ctx.step('count', () => 3)).toEqualTypeOf<number>();
          const charged = ctx.step(
            'charge',
            async (tx: { query(sql: string): void }) => {
              tx.query('SELECT 1');
              return { id: 'ch_1' };
            },
            { transaction: true },
          );
          expectTypeOf(charged).toEqualTypeOf<Promise<{ id: string }>>();
          void charged.catch(() => undefined);
        },
        ping: async () => {},
      },
    });
    await typed.start();
    try {
      const job = await typed.enqueue('send-email', { to: 'a@b.c' });
      expectTypeOf(job.type).toEqualTypeOf<'send-email'>();
      expectTypeOf(job.payload).toEqualTypeOf<{ to: string }>();
      const result = await typed.result(job, { timeoutMs: 5_000 });
      expectTypeOf(result).toEqualTypeOf<{ messageId: string }>();
      expect(result).toEqual({ messageId: 'm-a@b.c' });
      // A type without a payload may leave it out.
      await typed.enqueue('ping');

      if (Math.random() > 2) {
        // Compile-time checks only (never run).
        // @ts-expect-error a typo in the type
        await typed.enqueue('send-emial', { to: 'a@b.c' });
        // @ts-expect-error a payload of the wrong shape
        await typed.enqueue('send-email', { address: 'a@b.c' });
        // @ts-expect-error a payload is required for this type
        await typed.enqueue('report');
        new JobEngine<Jobs>({
          store,
          handlers: {
            // @ts-expect-error a handler returning the wrong result
            'send-email': async () => ({ id: 1 }),
          },
        });
        new JobEngine<Jobs>({
          store,
          // @ts-expect-error a handler of a type the map does not have
          handlers: { unknown: async () => {} },
        });
        // @ts-expect-error the payload-typed form is for untyped engines only
        await typed.enqueue<{ to: string }>('send-email', { to: 'a@b.c' });
        await typed.enqueueMany([
          { type: 'report', payload: { month: '2026-11' } },
          // @ts-expect-error enqueueMany checks each item
          { type: 'report', payload: { day: 1 } },
        ]);
      }
    } finally {
      await typed.stop({ timeoutMs: 1_000 });
    }
  });

  it('an untyped engine takes any type and payload, as before', async () => {
    const store = new MemoryJobStore();
    const untyped = engine({ store, handlers: { anything: async (job: Job) => job.payload } });
    const job = await untyped.enqueue('anything', { x: 1 });
    expectTypeOf(job.payload).toBeAny();
    await untyped.enqueue('other');
    // The payload-typed form, as before job maps.
    const typedPayload = await untyped.enqueue<{ x: number }>('anything', { x: 2 });
    expectTypeOf(typedPayload.payload).toEqualTypeOf<{ x: number }>();
    await waitFor(async () => (await store.getJob(job.id))?.state === 'async', 'stored');
  });
});
