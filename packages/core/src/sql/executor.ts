/**
 * How the SQL core talks to a driver. Store operations are generators that yield `Query`s and
 * receive `QueryOutcome`s (`Operation`), so one piece of code runs synchronously inside a
 * better-sqlite3 transaction and asynchronously on pg, mysql2 or a TypeORM query runner. An
 * `Executor` is the driver glue: it drives an operation on one connection, in a transaction or
 * statement by statement.
 */
import type { SqlRow } from './rows.js';

/** One statement. `?` marks parameters; the dialect's `placeholders` rewrites them for its driver. */
export interface Query {
  sql: string;
  params: readonly unknown[];
  /**
   * Plan with this call's values every time: a driver that prepares statements (and so may
   * reuse a plan made when the table was empty) runs it unprepared. For statements whose best
   * plan depends on how many rows there are, off the hot path.
   */
  planEachTime?: boolean;
  /**
   * The driver may return each row as an array of its values in select-list order (`pg` does:
   * its named rows cost a store by column name per column). A dialect that sets it reads both
   * shapes: drivers without an array mode return named rows.
   */
  arrayRows?: boolean;
}

/** What a statement returned, the same shape for every driver. */
export interface QueryOutcome {
  rows: SqlRow[];
  /** Rows changed by an INSERT/UPDATE/DELETE (rows returned, for a read). */
  affected: number;
  /** AUTO_INCREMENT id of the first inserted row (MySQL), or null. */
  insertId: string | null;
}

/** A store operation: yields statements, gets their outcomes back, returns its result. */
export type Operation<T> = Generator<Query, T, QueryOutcome>;

export interface RunOptions {
  /** Run all statements in one transaction (READ COMMITTED where the database has levels). */
  transaction: boolean;
  /** The caller's open transaction, in the driver's terms: statements join it instead. */
  tx?: unknown;
  /**
   * `heartbeat`: a lease renewal. An executor with a connection kept for renewals runs it
   * there, so a heartbeat never queues behind a busy pool (DESIGN: heartbeats have their own
   * connection); others may ignore it. `migrate`: a schema change, which may rightly take
   * long on a big table (or wait for another process's migration): an executor that bounds
   * statements (`withDeadline`) leaves these unbounded.
   */
  purpose?: 'heartbeat' | 'migrate';
}

/**
 * Runs operations on a driver. Every statement of one operation goes to one connection, so
 * session state (MySQL `GET_LOCK`) holds across them.
 */
export interface Executor {
  run<T>(op: Operation<T>, options: RunOptions): Promise<T>;
  /**
   * Optional: opens a transaction on a connection of its own, gives `work` the driver's handle
   * for it (what a handler writes with) and `run`, which runs operations in the same
   * transaction; commits when `work` resolves, rolls back when it rejects. Backs
   * `JobStore.completeInTransaction`.
   */
  transaction?<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T>;
  /** Releases connections the executor owns. */
  close(): Promise<void>;
}

/**
 * Drives `op` with a synchronous statement runner (better-sqlite3). A driver error is thrown
 * into the operation, which may catch it (a duplicate key) or let it end the operation.
 */
export function driveSync<T>(op: Operation<T>, execute: (query: Query) => QueryOutcome): T {
  let step = op.next();
  while (!step.done) {
    let outcome: QueryOutcome;
    try {
      outcome = execute(step.value);
    } catch (error) {
      step = op.throw(error);
      continue;
    }
    step = op.next(outcome);
  }
  return step.value;
}

/** Drives `op` with an asynchronous statement runner (pg, mysql2, TypeORM). */
export async function driveAsync<T>(
  op: Operation<T>,
  execute: (query: Query) => Promise<QueryOutcome>,
): Promise<T> {
  let step = op.next();
  while (!step.done) {
    let outcome: QueryOutcome;
    try {
      outcome = await execute(step.value);
    } catch (error) {
      step = op.throw(error);
      continue;
    }
    step = op.next(outcome);
  }
  return step.value;
}

/** Maps a driver's result pieces to a `QueryOutcome`. */
export function outcome(rows: SqlRow[], affected: number, insertId: unknown = null): QueryOutcome {
  return {
    rows,
    affected,
    insertId: insertId === null || insertId === undefined ? null : String(insertId),
  };
}

/**
 * Runs work one piece at a time, in the order it came: an executor's transactions on a connection
 * that holds one at a time (a file's second connection, or TypeORM's one QueryRunner on SQLite).
 */
export class OneAtATime {
  private last: Promise<void> = Promise.resolve();

  async run<T>(work: () => Promise<T>): Promise<T> {
    const previous = this.last;
    let done = (): void => {};
    this.last = new Promise((resolve) => {
      done = resolve;
    });
    try {
      await previous;
      return await work();
    } finally {
      done();
    }
  }
}
