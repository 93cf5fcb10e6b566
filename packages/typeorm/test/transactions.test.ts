import { makeNewJob } from '@jobs/conformance';
/**
 * Jobs inside the app's own TypeORM transactions (the transactional outbox), on every driver:
 * the app's row and its job commit together or not at all, and a JobEngine runs what committed.
 */
import { JobEngine, ValidationError } from '@jobs/core';
import { DataSource, type EntityManager, EntitySchema } from 'typeorm';
import { afterEach, describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import {
  createTestDatabase,
  type Driver,
  serverAvailable,
  type TestDatabase,
} from './databases.js';

interface Order {
  id?: number;
  email: string;
}

const OrderEntity = new EntitySchema<Order>({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: Number, primary: true, generated: 'increment' },
    email: { type: String, length: 200 },
  },
});

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

describe.each(drivers)('transactional enqueue on %s', (driver) => {
  let cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup = [];
  });

  async function setup(): Promise<{
    dataSource: DataSource;
    store: TypeormJobStore;
    engine: JobEngine;
    db: TestDatabase;
  }> {
    const db = await createTestDatabase(driver, [OrderEntity]);
    cleanup.push(() => db.drop());
    const dataSource = new DataSource({ ...db.options, synchronize: true });
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    cleanup.push(() => store.close());
    await store.migrate();
    const engine = new JobEngine({ store });
    return { dataSource, store, engine, db };
  }

  it('the order row and its job commit together', async () => {
    const { dataSource, store, engine } = await setup();
    const job = await dataSource.transaction(async (manager) => {
      const order = await manager.save(OrderEntity, { email: 'a@example.com' });
      return engine.enqueue('send-confirmation', { orderId: order.id }, { tx: manager });
    });
    expect(await dataSource.getRepository(OrderEntity).count()).toBe(1);
    expect((await store.getJob(job.id))?.payload).toEqual({ orderId: 1 });
  });

  it('a failing save rolls back the job enqueued before it: neither row exists', async () => {
    const { dataSource, store, engine } = await setup();
    let jobId = '';
    await expect(
      dataSource.transaction(async (manager) => {
        const job = await engine.enqueue('send-confirmation', { orderId: 1 }, { tx: manager });
        jobId = job.id;
        await manager.save(OrderEntity, { email: 'b@example.com' });
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');
    expect(jobId).not.toBe('');
    expect(await dataSource.getRepository(OrderEntity).count()).toBe(0);
    expect(await store.getJob(jobId)).toBeNull();
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('a job enqueued with a QueryRunner in an open transaction commits with it', async () => {
    const { dataSource, store } = await setup();
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    const [result] = await store.enqueue(
      [makeNewJob({ type: 't', payload: null, retries: 0, key: 'k' })],
      { tx: runner },
    );
    await runner.commitTransaction();
    await runner.release();
    expect((await store.getJob(result!.job.id))?.key).toBe('k');
  });

  it('tx that is not an open transaction is rejected and nothing is written', async () => {
    const { dataSource, engine, store } = await setup();
    const pass =
      /so the job would commit on its own, outside your transaction: pass the EntityManager \(or QueryRunner\) of an open transaction/;
    // The DataSource (the pool of TypeORM), its manager, a QueryRunner never started.
    const refused = engine.enqueue('t', {}, { tx: dataSource });
    await expect(refused).rejects.toThrow(ValidationError);
    await expect(refused).rejects.toThrow(/^tx: \[@jobs\/typeorm\] is a DataSource, /);
    await expect(refused).rejects.toThrow(pass);
    await expect(engine.enqueue('t', {}, { tx: dataSource.manager })).rejects.toThrow(
      /is an EntityManager outside a transaction/,
    );
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      await expect(engine.enqueue('t', {}, { tx: runner })).rejects.toThrow(
        /is a QueryRunner outside a transaction \(no startTransaction\(\)\)/,
      );
      // Committed, it is outside again.
      await runner.startTransaction();
      await runner.commitTransaction();
      await expect(engine.enqueue('t', {}, { tx: runner })).rejects.toThrow(pass);
    } finally {
      await runner.release();
    }
    await expect(engine.enqueue('t', {}, { tx: {} })).rejects.toThrow(
      /is no EntityManager or QueryRunner/,
    );
    expect(await store.stats()).toEqual([]);
  });

  it('a JobEngine runs the job of a committed order, and never the job of a rolled-back one', async () => {
    const { dataSource, store } = await setup();
    const sent: unknown[] = [];
    const engine = new JobEngine({
      store,
      leaseMs: 2000,
      pollIntervalMs: 50,
      handlers: { 'send-confirmation': async (job) => void sent.push(job.payload) },
    });
    await engine.start();
    try {
      await dataSource
        .transaction(async (manager) => {
          await engine.enqueue('send-confirmation', { email: 'lost@example.com' }, { tx: manager });
          throw new Error('rollback');
        })
        .catch(() => undefined);
      await dataSource.transaction(async (manager) => {
        await manager.save(OrderEntity, { email: 'kept@example.com' });
        await engine.enqueue('send-confirmation', { email: 'kept@example.com' }, { tx: manager });
      });
      const deadline = Date.now() + 10_000;
      while (sent.length === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      // Give a wrongly surviving rolled-back job the chance to run too.
      await new Promise((r) => setTimeout(r, 200));
      expect(sent).toEqual([{ email: 'kept@example.com' }]);
      expect(await store.stats()).toEqual([]);
    } finally {
      await engine.stop({ timeoutMs: 2000 });
    }
  });
});

describe.runIf(drivers.includes('better-sqlite3'))('SQLite: one shared connection', () => {
  it('store calls wait while the app holds a transaction, and are not part of it', async () => {
    const db = await createTestDatabase('better-sqlite3', [OrderEntity]);
    const dataSource = new DataSource({ ...db.options, synchronize: true });
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    try {
      await store.migrate();
      let outside: Promise<unknown> | null = null;
      await expect(
        dataSource.transaction(async (manager) => {
          await manager.save(OrderEntity, { email: 'x@example.com' });
          // Not passed the manager: must not join (and roll back with) this transaction.
          outside = store.enqueue([makeNewJob({ type: 'outside', payload: 1, retries: 0 })]);
          await new Promise((r) => setTimeout(r, 50));
          throw new Error('rollback');
        }),
      ).rejects.toThrow('rollback');
      await outside;
      expect(await dataSource.getRepository(OrderEntity).count()).toBe(0);
      expect((await store.stats()).map((s) => s.type)).toEqual(['outside']);
    } finally {
      await store.close();
      await db.drop();
    }
  });

  it("two jobs' ctx.transaction opened together each commit their own writes and completion, one after the other", async () => {
    const db = await createTestDatabase('better-sqlite3', [OrderEntity]);
    const dataSource = new DataSource({ ...db.options, synchronize: true });
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    // Both handlers call ctx.transaction in the same turn, once both run: TypeORM's one
    // QueryRunner then saw two BEGINs (the second failed, and its rollback ended the first).
    let arrived = 0;
    let bothRun = (): void => {};
    const together = new Promise<void>((resolve) => {
      bothRun = resolve;
    });
    const returned: string[] = [];
    const failures: unknown[] = [];
    const engine = new JobEngine({
      store,
      concurrency: 2,
      pollIntervalMs: 50,
      handlers: {
        order: async (job, ctx) => {
          arrived += 1;
          if (arrived === 2) bothRun();
          await together;
          await ctx.transaction(async (tx) => {
            await (tx as EntityManager).save(OrderEntity, { email: String(job.payload) });
          });
          returned.push(String(job.payload));
        },
      },
    });
    engine.on('failed', ({ error }) => void failures.push(error));
    try {
      await store.migrate();
      await engine.enqueue('order', 'a@example.com', { retries: 0 });
      await engine.enqueue('order', 'b@example.com', { retries: 0 });
      await engine.start();
      const deadline = Date.now() + 20_000;
      while ((await store.stats()).length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(failures).toEqual([]);
      expect(returned.sort()).toEqual(['a@example.com', 'b@example.com']);
      expect(await store.stats()).toEqual([]);
      const orders = await dataSource.getRepository(OrderEntity).find();
      expect(orders.map((o) => o.email).sort()).toEqual(['a@example.com', 'b@example.com']);
    } finally {
      await engine.stop({ timeoutMs: 2_000 });
      await store.close();
      await db.drop();
    }
  });

  it('a store call that waits too long for an app transaction fails with a message saying to pass tx', async () => {
    const db = await createTestDatabase('better-sqlite3');
    const dataSource = new DataSource(db.options);
    await dataSource.initialize();
    const store = new TypeormJobStore({
      dataSource,
      destroyDataSourceOnClose: true,
      sqliteTransactionWaitMs: 100,
    });
    try {
      await store.migrate();
      await dataSource.transaction(async () => {
        await expect(store.stats()).rejects.toThrow(/pass \{ tx: manager \}/);
      });
    } finally {
      await store.close();
      await db.drop();
    }
  });
});

describe.runIf(drivers.includes('postgres'))('PostgreSQL: NOTIFY follows the transaction', () => {
  it('a subscriber on another DataSource is woken by a committed enqueue, not by a rolled-back one', async () => {
    const db = await createTestDatabase('postgres');
    const open = async (): Promise<TypeormJobStore> => {
      const dataSource = new DataSource(db.options);
      await dataSource.initialize();
      return new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    };
    const store = await open();
    const peer = await open();
    try {
      await store.migrate();
      let wakeUps = 0;
      const off = peer.subscribe?.(() => {
        wakeUps += 1;
      });
      expect(off).toBeTypeOf('function');
      await new Promise((r) => setTimeout(r, 200)); // LISTEN connects asynchronously
      const engine = new JobEngine({ store });
      await store.dataSource
        .transaction(async (manager) => {
          await engine.enqueue('t', {}, { tx: manager });
          throw new Error('rollback');
        })
        .catch(() => undefined);
      await new Promise((r) => setTimeout(r, 200));
      expect(wakeUps, 'woken by a rolled-back enqueue').toBe(0);
      await store.dataSource.transaction(async (manager) => {
        await engine.enqueue('t', {}, { tx: manager });
        await new Promise((r) => setTimeout(r, 100));
        expect(wakeUps, 'woken before commit').toBe(0);
      });
      const deadline = Date.now() + 5_000;
      while (wakeUps === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(wakeUps).toBeGreaterThan(0);
      off?.();
    } finally {
      await peer.close();
      await store.close();
      await db.drop();
    }
  });
});

describe.each(drivers.filter((d) => d !== 'mysql'))('pickup after commit on %s', (driver) => {
  it('a job enqueued with tx runs right after the commit, long before the next poll', async () => {
    const db = await createTestDatabase(driver);
    const dataSource = new DataSource(db.options);
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    let ran = false;
    const engine = new JobEngine({
      store,
      pollIntervalMs: 60_000,
      handlers: {
        work: () => {
          ran = true;
        },
      },
    });
    try {
      await store.migrate();
      await engine.start();
      await new Promise((r) => setTimeout(r, 300)); // the engine is idle, waiting for its poll
      await dataSource.transaction(async (manager) => {
        await engine.enqueue('work', {}, { tx: manager });
        await new Promise((r) => setTimeout(r, 50));
      });
      // Not a timing assertion on speed: 10 s is far below the 60 s poll it must not wait for.
      const deadline = Date.now() + 10_000;
      while (!ran && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(ran).toBe(true);
    } finally {
      await engine.stop({ timeoutMs: 2_000 });
      await store.close();
      await db.drop();
    }
  });
});
