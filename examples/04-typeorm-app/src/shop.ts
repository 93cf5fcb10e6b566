/**
 * A tiny shop on TypeORM + @jobs: placing an order saves the `Order` and enqueues its
 * confirmation email in ONE database transaction, so there is never an order without its
 * email, nor an email for an order that was rolled back.
 */
import 'reflect-metadata';
import { type Job, JobEngine } from '@jobs/core';
import { jobsEntities, jobsMigration, TypeormJobStore } from '@jobs/typeorm';
import { DataSource } from 'typeorm';
import { connectionOptions, databaseType } from './database.js';
import { CreateOrders1700000000000, type Order, OrderEntity } from './order.js';

export interface ConfirmationEmail {
  orderId: number;
  to: string;
  item: string;
}

export interface Shop {
  dataSource: DataSource;
  engine: JobEngine;
  store: TypeormJobStore;
  /** Saves the order and enqueues its email together; `failPayment` throws after both. */
  placeOrder(item: string, email: string, options?: { failPayment?: boolean }): Promise<Order>;
  close(): Promise<void>;
}

/**
 * Opens the shop on `database` (a PostgreSQL/MySQL/MariaDB URL or a SQLite file, see
 * `database.ts`) and applies its migrations; `send` is what "sending" an email means here.
 */
export async function openShop(
  database: string,
  send: (email: ConfirmationEmail) => void,
): Promise<Shop> {
  const dataSource = new DataSource({
    ...connectionOptions(database),
    // The jobs tables are entities too, so synchronize/migration:generate leave them alone.
    entities: [OrderEntity, ...jobsEntities(databaseType(database))],
    migrations: [CreateOrders1700000000000, jobsMigration()],
  });
  await dataSource.initialize();
  await dataSource.runMigrations();

  // No second connection pool: the store runs on the app's DataSource.
  const store = new TypeormJobStore({ dataSource });
  const engine = new JobEngine({
    store,
    concurrency: 4,
    leaseMs: 5_000,
    pollIntervalMs: 200,
    handlers: {
      'send-confirmation-email': async (job: Job<ConfirmationEmail>) => send(job.payload),
    },
  });

  return {
    dataSource,
    engine,
    store,
    async placeOrder(item, email, options = {}) {
      return dataSource.transaction(async (manager) => {
        const order = await manager.save(OrderEntity, { item, email } as Order);
        await engine.enqueue<ConfirmationEmail>(
          'send-confirmation-email',
          { orderId: order.id, to: email, item },
          { tx: manager, key: `order-${order.id}-confirmation` },
        );
        if (options.failPayment) throw new Error(`payment for ${item} declined`);
        return order;
      });
    },
    async close() {
      await engine.stop({ timeoutMs: 5_000 });
      await store.close();
      await dataSource.destroy();
    },
  };
}
