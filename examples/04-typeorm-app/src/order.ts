/** The app's own table: an `Order`, defined without decorators. */
import { EntitySchema, type MigrationInterface, type QueryRunner } from 'typeorm';

export interface Order {
  id: number;
  item: string;
  email: string;
  createdAt: Date;
}

export const OrderEntity = new EntitySchema<Order>({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    item: { type: 'varchar', length: 200 },
    email: { type: 'varchar', length: 200 },
    createdAt: { type: 'datetime', name: 'created_at', createDate: true },
  },
});

/** The app's migration for its own table; the jobs tables come from `jobsMigration()`. */
export class CreateOrders1700000000000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      `CREATE TABLE "orders" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL,
        "item" varchar(200) NOT NULL, "email" varchar(200) NOT NULL,
        "created_at" datetime NOT NULL DEFAULT (datetime('now')))`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE "orders"');
  }
}
