/**
 * What an idle MySQL/MariaDB node costs the server: the statements one engine sends while no job
 * comes, counted on every mysql2 connection of this process (the store's pool, its lease-renewal
 * and wait connections) — a count, not a time. Its one wait per `notifyWaitMs` reads whether a
 * job is due; housekeeping passes (lease recovery every `leaseMs / 2`) open no transaction and
 * acquire nothing; the engine's own poll comes every 30 s. A job another store enqueues still
 * starts: its enqueue ends the wait.
 */

import { makeNewJob } from '@jobs/conformance';
import { JobEngine, silentLogger } from '@jobs/core';
import mysqlCore from 'mysql2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MysqlJobStore } from '../src/index.js';
import { MYSQL_URL, reachable, TestDatabase } from './helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (bounded) until `done()`; says whether it came. */
async function until(done: () => boolean, attempts = 500): Promise<boolean> {
  for (let i = 0; i < attempts && !done(); i++) await sleep(20);
  return done();
}

/** The prototype of mysql2's connections, where `query` and `execute` live. */
const connectionMethods = (mysqlCore as unknown as { Connection: { prototype: object } }).Connection
  .prototype as Record<string, unknown>;

/** The statements every mysql2 connection of this process sends, by their text. */
class StatementLog {
  readonly texts: string[] = [];
  private readonly originals: [string, unknown][] = [];

  start(): void {
    for (const method of ['query', 'execute']) {
      const original = connectionMethods[method] as (...args: unknown[]) => unknown;
      this.originals.push([method, original]);
      const texts = this.texts;
      connectionMethods[method] = function (this: unknown, ...args: unknown[]) {
        const first = args[0] as string | { sql?: string };
        texts.push(String(typeof first === 'string' ? first : first?.sql));
        return original.apply(this, args);
      };
    }
  }

  stop(): void {
    for (const [method, original] of this.originals) connectionMethods[method] = original;
    this.originals.length = 0;
  }

  /** Statements sent since `from` (an earlier `texts.length`) whose text matches `pattern`. */
  since(from: number, pattern: RegExp = /./): string[] {
    return this.texts.slice(from).filter((text) => pattern.test(text));
  }
}

/**
 * What an engine sends from `start()` on its own, on a store no engine used before, counted
 * once and stable: two session settings per pooled connection (2 × 2: history pruning runs
 * beside the first pass); the server version (1); the schema check (1); the clock (2); lease
 * recovery (the lapsed-lease read, the follow-up read, two blocked-set sweep reads: 4); the
 * schedules (due ones, then all: 2); the unhandled-type check (1); history pruning (START
 * TRANSACTION, its lock, the read of its partitions, a delete, the unlock, COMMIT: 6); an
 * acquisition (START TRANSACTION, the locking read, COMMIT: 3); the next due time (1) — 25.
 */
const START_UP_STATEMENTS = 25;
/**
 * The window counted, in seconds: one wait starts every 4 s (`notifyWaitMs`), so two in six
 * seconds, and the engine's own poll (6 statements) comes after 30 s — at 5 s, as it used to,
 * it would break the bound of one statement a second.
 */
const WINDOW_S = 6;

describe.skipIf(!reachable)('an idle MySQL/MariaDB engine', () => {
  const db = new TestDatabase();
  db.register();
  const log = new StatementLog();
  let stores: MysqlJobStore[] = [];
  let engines: JobEngine[] = [];

  beforeEach(() => {
    stores = [];
    engines = [];
  });
  afterEach(async () => {
    log.stop();
    await Promise.all(engines.map((engine) => engine.stop()));
    await Promise.all(stores.map((store) => store.close()));
  });

  /** A store with default options on the test database, closed after the test. */
  function store(tablePrefix: string): MysqlJobStore {
    const opened = new MysqlJobStore({ uri: MYSQL_URL, database: db.name, tablePrefix });
    stores.push(opened);
    return opened;
  }

  it('sends at most one statement a second after start-up, and still starts a job another store enqueues', async () => {
    const writer = store('idle_');
    await writer.migrate();
    const started: string[] = [];
    const node = store('idle_');
    const engine = new JobEngine({
      store: node,
      logger: silentLogger,
      handlers: {
        work: async (job) => {
          started.push(job.id);
        },
      },
    });
    engines.push(engine);
    log.start();
    const from = log.texts.length;
    await engine.start();
    await sleep(WINDOW_S * 1_000);
    const sent = log.since(from);
    log.stop();
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.length).toBeLessThanOrEqual(WINDOW_S + START_UP_STATEMENTS);

    const [enqueued] = await writer.enqueue([makeNewJob({ type: 'work' })]);
    expect(await until(() => started.includes(String(enqueued?.job.id)))).toBe(true);
  });

  it('housekeeping passes of an idle engine open no transaction and acquire nothing', async () => {
    const node = store('housekeeping_');
    await node.migrate();
    // Lease recovery every 250 ms: a dozen housekeeping passes in three seconds, no poll.
    const engine = new JobEngine({
      store: node,
      logger: silentLogger,
      leaseMs: 500,
      handlers: { work: async () => {} },
    });
    engines.push(engine);
    await engine.start();
    // After start-up (its first pass acquires): only housekeeping and waits.
    await sleep(500);
    log.start();
    const from = log.texts.length;
    await sleep(3_000);
    const recoveries = log.since(from, /state` = 'running' AND `lock_expires_at` <=/);
    const transactions = log.since(from, /^START TRANSACTION|FOR UPDATE SKIP LOCKED/);
    log.stop();
    expect(recoveries.length).toBeGreaterThanOrEqual(4);
    expect(transactions).toEqual([]);
  });
});
