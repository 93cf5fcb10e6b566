import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DataSource } from 'typeorm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connectionOptions, databaseType } from '../src/database.js';
import { OrderEntity } from '../src/order.js';
import { type ConfirmationEmail, openShop, type Shop } from '../src/shop.js';
import {
  createTestDatabase,
  type Server,
  serverAvailable,
  type TestDatabase,
} from './databases.js';

const servers: Server[] = [];
for (const server of ['sqlite', 'postgres', 'mysql'] as const) {
  if (await serverAvailable(server)) servers.push(server);
}

describe.each(servers)('the shop on %s', (server) => {
  let db: TestDatabase;
  let shop: Shop | null = null;
  beforeEach(async () => {
    db = await createTestDatabase(server);
  });
  afterEach(async () => {
    await shop?.close();
    shop = null;
    await db.drop();
  });

  it('a committed order gets exactly one email; a failed one leaves no order and no job', async () => {
    const sent: ConfirmationEmail[] = [];
    shop = await openShop(db.database, (email) => sent.push(email));
    const order = await shop.placeOrder('teapot', 'ada@example.com');
    await expect(
      shop.placeOrder('kettle', 'bob@example.com', { failPayment: true }),
    ).rejects.toThrow('payment for kettle declined');
    expect(await shop.dataSource.getRepository('Order').find()).toMatchObject([
      { id: order.id, item: 'teapot', email: 'ada@example.com' },
    ]);
    const waiting = await shop.engine.admin.listJobs({ limit: 10, offset: 0 });
    expect(waiting.map((j) => j.payload)).toEqual([
      { orderId: order.id, to: 'ada@example.com', item: 'teapot' },
    ]);

    await shop.engine.start();
    const deadline = Date.now() + 10_000;
    while (sent.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200));
    expect(sent).toEqual([{ orderId: order.id, to: 'ada@example.com', item: 'teapot' }]);
    expect(await shop.engine.admin.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('src/main.ts runs end to end on the database DATABASE_URL names', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    // Without DATABASE_URL the example uses a SQLite file of its own.
    if (server === 'sqlite') delete env.DATABASE_URL;
    else env.DATABASE_URL = db.database;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'src/main.ts'],
      { cwd: fileURLToPath(new URL('..', import.meta.url)), env, timeout: 60_000 },
    );
    const type = server === 'sqlite' ? 'better-sqlite3' : databaseType(db.database);
    expect(stdout).toContain(`Shop on ${type}.`);
    expect(stdout).toMatch(/in the database now: 1 new order\(s\), 1 job\(s\) waiting/);
    expect(stdout).toMatch(/your order #1 \(teapot\) is confirmed/);
    expect(stdout).not.toMatch(/kettle\) is confirmed/);
    expect(stdout).toMatch(/emails sent: 1; jobs left: 0/);
    if (server === 'sqlite') return;
    // The run really used the test's database: its order is there, and no job is left.
    const check = new DataSource({ ...connectionOptions(db.database), entities: [OrderEntity] });
    await check.initialize();
    try {
      expect(await check.getRepository(OrderEntity).find()).toMatchObject([
        { id: 1, item: 'teapot' },
      ]);
      // The store's default tables: `jobs.jobs` on PostgreSQL, `jobs_jobs` on MySQL/MariaDB.
      const table = server === 'postgres' ? 'jobs.jobs' : 'jobs_jobs';
      const [jobs] = await check.query(`SELECT count(*) AS n FROM ${table}`);
      expect(Number(jobs.n)).toBe(0);
    } finally {
      await check.destroy();
    }
  });
});
