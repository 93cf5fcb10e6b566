/**
 * An order workflow (see README.md): charge the card as a fenced step, wait for an approval
 * signal sent over HTTP, print two shipping labels as child jobs in parallel, sleep a moment,
 * then confirm. The job parks while it waits — no worker, lease or connection held — and each
 * time it resumes, the code between steps runs again while finished steps return their
 * checkpoints.
 *
 * A tiny `node:http` server takes `POST /orders/:id/approve` and calls `engine.signal`; the
 * script sends that request itself once the job waits, so `pnpm start` runs unattended.
 *
 * DATABASE_URL picks PostgreSQL (`postgres://…`) or MySQL/MariaDB (`mysql://…`); unset, a
 * SQLite file (`JOBS_DB`, default `workflow.db`), made anew on each run.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Job, JobEngine } from '@jobs/core';
import { openDatabase } from './database.js';

interface Order {
  orderId: string;
  amountCents: number;
  parcels: number;
}

interface Approval {
  approvedBy: string;
}

const log = (message: string): void => console.log(message);
const db = await openDatabase(process.env.DATABASE_URL);
await db.store.migrate();
// The app's own table, in the same database as the jobs.
await db.query('drop table if exists order_charges');
await db.query(
  'create table order_charges (order_id varchar(64) primary key, amount_cents integer not null)',
);

/** How often each piece really ran, across all the runs of the workflow. */
const ran = { handler: 0, charge: 0, labels: 0, confirm: 0 };

const engine = new JobEngine({
  store: db.store,
  pollIntervalMs: 100,
  handlers: {
    'place-order': async (job: Job<Order>, ctx) => {
      const order = job.payload;
      // Code outside steps runs on every run: keep it cheap and free of side effects.
      ran.handler += 1;
      log(`run ${ran.handler}: place-order ${order.orderId}`);

      // Fenced: the row and the checkpoint commit in one transaction, only while this worker
      // holds the job's lease — the card is charged exactly once.
      const charge = await ctx.step(
        'charge',
        async (tx) => {
          ran.charge += 1;
          await db.writeIn(tx, 'insert into order_charges (order_id, amount_cents) values (?, ?)', [
            order.orderId,
            order.amountCents,
          ]);
          log(
            `  charge    ${order.amountCents} cents charged (row + checkpoint in one transaction)`,
          );
          return { chargeId: `ch_${order.orderId}` };
        },
        { transaction: true },
      );

      // Parks the job until POST /orders/:id/approve signals it (or a day passes).
      const approval = await ctx.waitFor<Approval>('approval', {
        key: order.orderId,
        timeoutMs: 86_400_000,
      });
      if (approval === null) return { status: 'not approved within a day', charge };
      log(`  approval  approved by ${approval.approvedBy} (the wait's checkpoint)`);

      // Two child jobs at once; the parent parks until both finished.
      const labels = await Promise.all(
        Array.from({ length: order.parcels }, (_, i) =>
          ctx.run<{ label: string }>(`label-${i + 1}`, 'print-label', {
            orderId: order.orderId,
            parcel: i + 1,
          }),
        ),
      );
      log(`  labels    ${labels.map((l) => l.label).join(', ')} (the children's results)`);

      // A short durable sleep (a carrier's pickup window, say): the job parks as a timer.
      await ctx.sleep('pickup-window', 300);

      const confirmation = await ctx.step('confirm', async () => {
        ran.confirm += 1;
        log(`  confirm   order ${order.orderId} confirmed to the customer`);
        return { mailed: true };
      });
      return { charge, approval, labels, confirmation };
    },
    'print-label': async (job: Job<{ orderId: string; parcel: number }>) => {
      ran.labels += 1;
      const label = `LBL-${job.payload.orderId}-${job.payload.parcel}`;
      log(`  child     print-label job ${job.id}: ${label}`);
      return { label };
    },
  },
});

// POST /orders/:id/approve → engine.signal('approval', { key: id, payload }).
const server = createServer(async (req, res) => {
  const match = /^\/orders\/([^/]+)\/approve$/.exec(req.url ?? '');
  if (req.method !== 'POST' || !match) {
    res.writeHead(404).end();
    return;
  }
  let body = '';
  for await (const chunk of req) body += chunk;
  try {
    const payload = JSON.parse(body || '{}') as Approval;
    const key = decodeURIComponent(match[1] as string);
    log(`http: POST ${req.url} ${body} → engine.signal('approval', { key: '${key}', payload })`);
    await engine.signal('approval', { key, payload });
    res.writeHead(202, { 'content-type': 'application/json' }).end('{"signalled":true}');
  } catch (error) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: (error as Error).message }));
  }
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
await once(server, 'listening');
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

log(`store: ${db.label}; approvals at ${origin}/orders/:id/approve`);
await engine.start();
const order: Order = { orderId: 'A-1001', amountCents: 2_400, parcels: 2 };
const job = await engine.enqueue('place-order', order);

// The job parks in the store, waiting for the signal; then "someone" approves it over HTTP.
for (;;) {
  const now = await engine.admin.getJob(job.id);
  if (now?.state === 'timer' && now.steps?.some((step) => step.name === 'approval')) break;
  await new Promise((resolve) => setTimeout(resolve, 50));
}
log(`job ${job.id} waits for approval (state timer: no worker, lease or connection held)`);
const response = await fetch(`${origin}/orders/${order.orderId}/approve`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ approvedBy: 'ops@example.com' }),
});
const answer = `${response.status} ${await response.text()}`;

const result = await engine.result(job, { timeoutMs: 30_000 });
const charges = await db.query('select count(*) as n from order_charges');
const record = await engine.admin.getJob(job.id);
log('');
log(`the approval request was answered ${answer}`);
log(
  `job ${job.id} completed after ${ran.handler} runs of its handler (attempt ${record?.attempts})`,
);
log(
  `ran: charge ${ran.charge}, print-label ${ran.labels}, confirm ${ran.confirm}; order_charges rows: ${Number(charges[0]?.n)}`,
);
for (const step of record?.steps ?? []) {
  log(`checkpoint ${step.name.padEnd(14)} ${JSON.stringify(step.result)}`);
}
log(`result: ${JSON.stringify(result)}`);

server.close();
await engine.stop();
await db.close();
