/**
 * Runs an `Operation` on a database connection: asynchronously on a TypeORM `QueryRunner`
 * (PostgreSQL, MySQL, or the caller's open transaction on any driver), or synchronously on the
 * better-sqlite3 handle under TypeORM's single SQLite connection.
 */
import type { SqlRow } from '@jobs/core';
import type { QueryRunner } from 'typeorm';
import type { Dialect, Operation, QueryOutcome } from './dialects/dialect.js';

function insertIdOf(raw: unknown): string | null {
  if (raw !== null && typeof raw === 'object' && 'insertId' in raw) {
    const id = (raw as { insertId: unknown }).insertId;
    return id === null || id === undefined ? null : String(id);
  }
  return null;
}

/** Drives `op` on a TypeORM QueryRunner; driver errors are thrown into the operation. */
export async function runOnQueryRunner<T>(
  runner: QueryRunner,
  dialect: Dialect,
  op: Operation<T>,
): Promise<T> {
  let step = op.next();
  while (!step.done) {
    let result: QueryOutcome;
    try {
      const raw = await runner.query(
        dialect.placeholders(step.value.sql),
        [...step.value.params],
        true,
      );
      const structured = raw as { records?: unknown[]; affected?: number; raw?: unknown };
      const rows = (Array.isArray(structured.records) ? structured.records : []) as SqlRow[];
      result = {
        rows,
        affected: structured.affected ?? rows.length,
        insertId: insertIdOf(structured.raw),
      };
    } catch (error) {
      step = op.throw(error);
      continue;
    }
    step = op.next(result);
  }
  return step.value;
}

/** The parts of a better-sqlite3 `Database` the store uses. */
export interface SqliteHandle {
  readonly inTransaction: boolean;
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
}

interface SqliteStatement {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

/**
 * Runs operations synchronously on the better-sqlite3 handle, each in its own transaction.
 * Being synchronous, an operation cannot interleave with the app's queries on the shared
 * connection; it only has to wait while the app has a TypeORM transaction open.
 */
export class SqliteRunner {
  private readonly statements = new Map<string, SqliteStatement>();

  constructor(private readonly handle: () => SqliteHandle) {}

  private prepare(sql: string): SqliteStatement {
    let stmt = this.statements.get(sql);
    if (!stmt) {
      stmt = this.handle().prepare(sql);
      this.statements.set(sql, stmt);
      if (this.statements.size > 200) {
        const oldest = this.statements.keys().next().value as string;
        this.statements.delete(oldest);
      }
    }
    return stmt;
  }

  /** Waits until the shared connection is outside any transaction, at most `timeoutMs`. */
  async idle(timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.handle().inTransaction) {
      if (Date.now() > deadline) {
        throw new Error(
          `the DataSource's SQLite connection stayed inside a transaction for ${timeoutMs} ms; ` +
            `${what} from inside dataSource.transaction() must pass { tx: manager }`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /** Runs `op` now, synchronously; `transaction` wraps it in BEGIN IMMEDIATE … COMMIT. */
  run<T>(op: Operation<T>, transaction: boolean): T {
    const db = this.handle();
    if (transaction) db.exec('BEGIN IMMEDIATE');
    try {
      let step = op.next();
      while (!step.done) {
        let result: QueryOutcome;
        try {
          const stmt = this.prepare(step.value.sql);
          const params = step.value.params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p));
          if (stmt.reader) {
            const rows = stmt.all(...params) as SqlRow[];
            result = { rows, affected: rows.length, insertId: null };
          } else {
            const info = stmt.run(...params);
            result = { rows: [], affected: info.changes, insertId: String(info.lastInsertRowid) };
          }
        } catch (error) {
          step = op.throw(error);
          continue;
        }
        step = op.next(result);
      }
      if (transaction) db.exec('COMMIT');
      return step.value;
    } catch (error) {
      if (transaction && db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  }
}
