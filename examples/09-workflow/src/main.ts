/**
 * An order workflow with durable steps (see README.md): charge → reserve stock (a transaction
 * step) → ship. Shipping fails on the first attempt; the retry runs only what did not finish.
 *
 * JOBS_DB (default `workflow.db` in the current folder) names the SQLite file; it is made anew
 * on each run.
 */
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Job, JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';

interface Order {
  orderId: string;
  sku: string;
  quantity: number;
  amountCents: number;
}

const filename = resolve(process.env.JOBS_DB ?? 'workflow.db');
for (const suffix of ['', '-wal', '-shm']) rmSync(filename + suffix, { force: true });

// The app's own table, in the same database file as the jobs.
const app = new Database(filename);
app.exec(`create table stock_reservations (
  order_id text primary key, sku text not null, quantity integer not null)`);

/** How often each step's function really ran, across all attempts. */
const ran = { charge: 0, reserve: 0, ship: 0 };
const log = (message: string): void => console.log(message);

const store = new SqliteJobStore({ filename });
await store.migrate();
const engine = new JobEngine({
  store,
  // One retry, soon: the demo should not wait for the default backoff.
  retry: { kind: 'fixed', delayMs: 200 },
  handlers: {
    'place-order': async (job: Job<Order>, ctx) => {
      const order = job.payload;
      // Code outside steps runs on every attempt.
      log(`attempt ${ctx.attempt}: workflow for order ${order.orderId} starts`);

      // A call to another system: once its result is checkpointed, it never runs again.
      const charge = await ctx.step('charge', async () => {
        ran.charge += 1;
        log(`attempt ${ctx.attempt}:   charge   charging ${order.amountCents} cents (the card)`);
        return { chargeId: `ch_${order.orderId}` };
      });

      // A write to this database: the insert and the checkpoint commit in one transaction,
      // only while this worker holds the job's lease — exactly once.
      const reservation = await ctx.step(
        'reserve',
        (tx: Database.Database) => {
          ran.reserve += 1;
          tx.prepare('insert into stock_reservations values (?, ?, ?)').run(
            order.orderId,
            order.sku,
            order.quantity,
          );
          log(`attempt ${ctx.attempt}:   reserve  ${order.quantity} × ${order.sku} reserved`);
          return { sku: order.sku, quantity: order.quantity };
        },
        { transaction: true },
      );

      const shipment = await ctx.step('ship', async () => {
        ran.ship += 1;
        if (ctx.attempt === 1) {
          log(`attempt ${ctx.attempt}:   ship     the carrier's API times out → the attempt fails`);
          throw new Error('carrier API timed out');
        }
        log(`attempt ${ctx.attempt}:   ship     label printed`);
        return { trackingNumber: `TRK-${order.orderId}` };
      });

      return { charge, reservation, shipment };
    },
  },
});

const finished = new Promise<Job>((done, fail) => {
  engine.on('completed', ({ job }) => done(job));
  engine.on('failed', ({ willRetry, retryDelayMs }) => {
    if (willRetry) log(`the engine retries the job in ${retryDelayMs} ms`);
  });
  engine.on('deadlettered', ({ error }) => fail(new Error(`order failed: ${error.message}`)));
});

await engine.start();
const job = await engine.enqueue<Order>(
  'place-order',
  { orderId: 'A-1001', sku: 'mug-blue', quantity: 2, amountCents: 2_400 },
  { retries: 1 },
);
const done = await finished;

// The finished job, from the store's history: its result and its step list.
const record = await engine.admin.getJob(done.id);
const reserved = app.prepare('select count(*) as n from stock_reservations').get() as { n: number };
log('');
log(`job ${job.id} completed after ${done.attempts} attempts`);
log(`step functions run: charge ${ran.charge}, reserve ${ran.reserve}, ship ${ran.ship}`);
log(`stock reservations for the order: ${reserved.n}`);
for (const step of record?.steps ?? []) {
  log(`checkpoint ${step.name.padEnd(8)} ${JSON.stringify(step.result)}`);
}
if (record && 'result' in record) log(`result: ${JSON.stringify(record.result)}`);
await engine.stop();
app.close();
await store.close();
