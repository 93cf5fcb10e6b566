/**
 * A per-customer limit: at most 2 exports of one customer run at once, across every worker.
 *
 * Two workers (two engines on their own connections, as two processes would be) with room for
 * 8 jobs each share 12 exports of three customers. Each export is enqueued with
 * `{ scope: customer, scopeLimit: 2 }`: the store leases a job only while fewer than 2 of its
 * customer run, and a customer's exports start in the order they were enqueued. The output
 * shows the most exports each customer ever had running at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { twoWorkers } from './two-workers.js';

export async function perCustomerLimit(filename: string): Promise<void> {
  console.log('— a per-customer limit of 2, across two workers —');
  const running = new Map<string, number>();
  const peak = new Map<string, number>();
  const started: string[] = [];
  let done = 0;
  const handler = async (job: { payload: { customer: string; n: number } }) => {
    const { customer, n } = job.payload;
    const now = (running.get(customer) ?? 0) + 1;
    running.set(customer, now);
    peak.set(customer, Math.max(peak.get(customer) ?? 0, now));
    started.push(`${customer}#${n}`);
    await sleep(150); // "export" the data
    running.set(customer, (running.get(customer) ?? 1) - 1);
    done += 1;
  };
  const { workers, runUntil } = await twoWorkers(filename, {
    concurrency: 8,
    handlers: { 'export-data': handler },
  });
  const customers = ['acme', 'globex', 'initech'];
  await workers[0]?.enqueueMany(
    Array.from({ length: 12 }, (_, i) => {
      const customer = customers[i % customers.length] as string;
      return {
        type: 'export-data',
        payload: { customer, n: Math.floor(i / customers.length) + 1 },
        options: { scope: customer, scopeLimit: 2 },
      };
    }),
  );
  await runUntil(() => done === 12);
  for (const customer of customers) {
    const order = started.filter((s) => s.startsWith(`${customer}#`)).join(', ');
    console.log(`${customer}: at most ${peak.get(customer)} at once; started ${order}`);
  }
  console.log('');
}
