/**
 * Example 04: an order and its confirmation email in one TypeORM transaction.
 *
 *   pnpm start                                                  SQLite, in a temporary file
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/shop pnpm start
 *   DATABASE_URL=mysql://root@127.0.0.1:3306/shop pnpm start     (mariadb://… for MariaDB)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { databaseType } from './database.js';
import { type ConfirmationEmail, openShop } from './shop.js';

const dir = process.env.DATABASE_URL ? null : mkdtempSync(join(tmpdir(), 'jobs-typeorm-app-'));
const database = process.env.DATABASE_URL ?? join(dir as string, 'shop.db');
const sent: ConfirmationEmail[] = [];
const shop = await openShop(database, (email) => {
  sent.push(email);
  console.log(`  📧 to ${email.to}: your order #${email.orderId} (${email.item}) is confirmed`);
});
console.log(`Shop on ${databaseType(database)}.`);

try {
  // On a server the tables stay between runs, so count what this run adds.
  const ordersBefore = await shop.dataSource.getRepository('Order').count();

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

  const orders = (await shop.dataSource.getRepository('Order').count()) - ordersBefore;
  const jobs = await shop.engine.admin.listJobs({ limit: 10, offset: 0 });
  console.log(`   in the database now: ${orders} new order(s), ${jobs.length} job(s) waiting`);
  console.log(
    `   (${jobs.map((j) => `${j.type} for order #${(j.payload as ConfirmationEmail).orderId}`).join(', ')})`,
  );

  console.log('3. Start the worker: it sends the email of every committed order, once.');
  await shop.engine.start();
  const deadline = Date.now() + 10_000;
  while (sent.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  // Long enough for a second email, had there been one.
  await new Promise((r) => setTimeout(r, 300));
  const left = await shop.engine.admin.listJobs({ limit: 10, offset: 0 });
  console.log(`   emails sent: ${sent.length}; jobs left: ${left.length}`);
  if (sent.length !== 1 || sent[0]?.orderId !== teapot.id || orders !== 1 || left.length !== 0) {
    console.error('unexpected outcome');
    process.exitCode = 1;
  }
} finally {
  await shop.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
}
