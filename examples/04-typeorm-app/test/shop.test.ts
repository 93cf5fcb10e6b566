import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { type ConfirmationEmail, openShop, type Shop } from '../src/shop.js';

let shop: Shop | null = null;
let dir = '';
afterEach(async () => {
  await shop?.close();
  shop = null;
  rmSync(dir, { recursive: true, force: true });
});

async function open(sent: ConfirmationEmail[]): Promise<Shop> {
  dir = mkdtempSync(join(tmpdir(), 'jobs-typeorm-app-test-'));
  shop = await openShop(join(dir, 'shop.db'), (email) => sent.push(email));
  return shop;
}

it('a committed order gets exactly one email; a failed one leaves no order and no job', async () => {
  const sent: ConfirmationEmail[] = [];
  const s = await open(sent);
  const order = await s.placeOrder('teapot', 'ada@example.com');
  await expect(s.placeOrder('kettle', 'bob@example.com', { failPayment: true })).rejects.toThrow(
    'payment for kettle declined',
  );
  expect(await s.dataSource.getRepository('Order').count()).toBe(1);
  const waiting = await s.engine.admin.listJobs({ limit: 10, offset: 0 });
  expect(waiting.map((j) => j.payload)).toEqual([
    { orderId: order.id, to: 'ada@example.com', item: 'teapot' },
  ]);

  await s.engine.start();
  const deadline = Date.now() + 10_000;
  while (sent.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 200));
  expect(sent).toEqual([{ orderId: order.id, to: 'ada@example.com', item: 'teapot' }]);
  expect(await s.engine.admin.listJobs({ limit: 10, offset: 0 })).toEqual([]);
});

it('the example runs end to end', async () => {
  const { execFile } = await import('node:child_process');
  const { promisify } = await import('node:util');
  const { fileURLToPath } = await import('node:url');
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'src/main.ts'],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      timeout: 60_000,
    },
  );
  expect(stdout).toMatch(/in the database now: 1 order\(s\), 1 job\(s\) waiting/);
  expect(stdout).toMatch(/your order #1 \(teapot\) is confirmed/);
  expect(stdout).not.toMatch(/kettle\) is confirmed/);
  expect(stdout).toMatch(/emails sent: 1; jobs left: 0/);
  dir = mkdtempSync(join(tmpdir(), 'jobs-typeorm-app-test-'));
});
