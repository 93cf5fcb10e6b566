/**
 * Example 04: an order and its confirmation email in one TypeORM transaction.
 *
 *   pnpm --filter @jobs/example-typeorm-app start
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ConfirmationEmail, openShop } from './shop.js';

const dir = mkdtempSync(join(tmpdir(), 'jobs-typeorm-app-'));
const sent: ConfirmationEmail[] = [];
const shop = await openShop(join(dir, 'shop.db'), (email) => {
  sent.push(email);
  console.log(`  📧 to ${email.to}: your order #${email.orderId} (${email.item}) is confirmed`);
});

try {
  console.log('1. Order a teapot: order row + email job, one transaction, committed.');
  const teapot = await shop.placeOrder('teapot', 'ada@example.com');
  console.log(`   saved order #${teapot.id}`);

  console.log(
    '2. Order a kettle, but the payment fails after both writes: the transaction rolls back.',
  );
  await shop
    .placeOrder('kettle', 'bob@example.com', { failPayment: true })
    .catch((error: Error) => {
      console.log(`   failed: ${error.message}`);
    });

  const orders = await shop.dataSource.getRepository('Order').count();
  const jobs = await shop.engine.admin.listJobs({ limit: 10, offset: 0 });
  console.log(`   in the database now: ${orders} order(s), ${jobs.length} job(s) waiting`);
  console.log(
    `   (${jobs.map((j) => `${j.type} for order #${(j.payload as ConfirmationEmail).orderId}`).join(', ')})`,
  );

  console.log('3. Start the worker: it sends the email of every committed order, once.');
  await shop.engine.start();
  const deadline = Date.now() + 10_000;
  while (sent.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 300));
  const left = await shop.engine.admin.listJobs({ limit: 10, offset: 0 });
  console.log(`   emails sent: ${sent.length}; jobs left: ${left.length}`);
  if (sent.length !== 1 || sent[0]?.item !== 'teapot' || orders !== 1 || left.length !== 0) {
    console.error('unexpected outcome');
    process.exitCode = 1;
  }
} finally {
  await shop.close();
  rmSync(dir, { recursive: true, force: true });
}
