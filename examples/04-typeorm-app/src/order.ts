/**
 * The app's own table: an `Order`, defined without decorators, in column types that PostgreSQL,
 * MySQL/MariaDB and SQLite all have.
 */
import { EntitySchema, type MigrationInterface, type QueryRunner, Table } from 'typeorm';

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
    // `Date`, not a type name: PostgreSQL calls it `timestamp`, the others `datetime`.
    createdAt: { type: Date, name: 'created_at', createDate: true },
  },
});

/** The app's migration for its own table; the jobs tables come from `jobsMigration()`. */
export class CreateOrders1700000000000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    const dateTime = runner.connection.options.type === 'postgres' ? 'timestamp' : 'datetime';
    // TypeORM's Table API writes the right DDL for each database.
    await runner.createTable(
      new Table({
        name: 'orders',
        columns: [
          {
            name: 'id',
            type: 'integer',
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
          { name: 'item', type: 'varchar', length: '200' },
          { name: 'email', type: 'varchar', length: '200' },
          { name: 'created_at', type: dateTime, default: 'CURRENT_TIMESTAMP' },
        ],
      }),
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.dropTable('orders');
  }
}
