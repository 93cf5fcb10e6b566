/**
 * What is specific to MySQL/MariaDB, beyond the conformance suite: concurrent migrate, the
 * caller's transactions, time zones, deadlock and lock-wait retries, the MySQL (no RETURNING)
 * settle path, and exclusive scopes under racing stores with due times crossing "now".
 */
import { makeNewJob, refOf, sleep } from '@jobs/conformance';
import type { Job } from '@jobs/core';
import { mysqlDialect } from '@jobs/core/sql';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { MysqlJobStore, type MysqlRetryEvent } from '../src/index.js';
import {
  MYSQL_URL,
  openStore,
  randomName,
  reachable,
  readRaw,
  sql,
  TestDatabase,
} from './helpers.js';

/** Every schema version this release knows, oldest first. */
const ALL_VERSIONS = mysqlDialect({ tablePrefix: 'jobs_' }).migrations.map((m) => m.version);

const db = new TestDatabase();

/** A migrated store on fresh tables of this file's database. */
async function freshStore(
  options: Parameters<typeof openStore>[1] = {},
): Promise<{ store: MysqlJobStore; prefix: string }> {
  const prefix = `${randomName('s')}_`;
  const store = openStore(db.name, { tablePrefix: prefix, ...options });
  db.keep(store);
  await store.migrate();
  return { store, prefix };
}

function peerOf(prefix: string, options: Parameters<typeof openStore>[1] = {}): MysqlJobStore {
  const store = openStore(db.name, { tablePrefix: prefix, ...options });
  db.keep(store);
  return store;
}

function poolStore(prefix: string, pool: mysql.Pool): MysqlJobStore {
  const store = new MysqlJobStore({ pool, database: db.name, tablePrefix: prefix });
  db.keep(store);
  return store;
}

describe.skipIf(!reachable)('@jobs/mysql specifics', () => {
  db.register();

  describe('migrate', () => {
    it('six stores migrating the same empty database at once all succeed and record each version once', async () => {
      const prefix = `${randomName('m')}_`;
      const stores = Array.from({ length: 6 }, () => peerOf(prefix));
      await Promise.all(stores.map((s) => s.migrate()));
      const versions = await sql(
        `SELECT version FROM \`${db.name}\`.\`${prefix}jobs_migrations\` ORDER BY version`,
      );
      expect(versions.map((r) => Number(r.version))).toEqual(ALL_VERSIONS);
      const [job] = await stores[0]!.enqueue([makeNewJob()]);
      expect(await stores[5]!.getJob(job!.job.id)).toMatchObject({ state: 'async' });
    });

    it('repairs a half-applied migration: tables present but no version recorded', async () => {
      const { store, prefix } = await freshStore();
      const [kept] = await store.enqueue([makeNewJob({ payload: { keep: true } })]);
      await sql(`DELETE FROM \`${db.name}\`.\`${prefix}jobs_migrations\``);
      const again = peerOf(prefix);
      await again.migrate();
      expect(await again.getJob(kept!.job.id)).toMatchObject({ payload: { keep: true } });
      const versions = await sql(
        `SELECT version FROM \`${db.name}\`.\`${prefix}jobs_migrations\` ORDER BY version`,
      );
      expect(versions.map((r) => Number(r.version))).toEqual(ALL_VERSIONS);
    });

    it('rejects unknown options, both or neither of uri and pool, and bad identifiers', () => {
      expect(() => new MysqlJobStore({ uri: MYSQL_URL, tablePrefx: 'x' } as never)).toThrow(
        /tablePrefx: \[@jobs\/mysql\] unknown option/,
      );
      expect(() => new MysqlJobStore({} as never)).toThrow(/exactly one of `uri` or `pool`/);
      expect(() => new MysqlJobStore({ uri: MYSQL_URL, tablePrefix: 'x; DROP' })).toThrow(
        /tablePrefix/,
      );
      expect(() => new MysqlJobStore({ uri: MYSQL_URL, database: 'a`b' })).toThrow(/database/);
      expect(() => new MysqlJobStore({ uri: MYSQL_URL, connectionLimit: 0 })).toThrow(
        /connectionLimit/,
      );
    });

    it('reads the server version and refuses nothing on this server', async () => {
      const { store } = await freshStore();
      const version = await store.serverVersion();
      expect(['mysql', 'mariadb']).toContain(version.flavor);
      expect(version.raw.length).toBeGreaterThan(0);
    });

    it('an unreachable server is a StoreError naming the package and the operation', async () => {
      const store = new MysqlJobStore({ uri: 'mysql://root@127.0.0.1:1/none' });
      db.keep(store);
      await expect(store.migrate()).rejects.toThrow(/^\[@jobs\/mysql\] migrate: /);
      await expect(
        store.acquire({
          owner: 'o',
          limit: 1,
          leaseMs: 1000,
          types: ['work'],
          queues: null,
          tenants: null,
        }),
      ).rejects.toMatchObject({
        code: 'STORE',
      });
    });
  });

  describe('enqueue inside the caller transaction', () => {
    it('commits with the caller, rolls back with the caller, and sees keys committed after its snapshot began', async () => {
      const { store } = await freshStore();
      const pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 3 });
      try {
        // Rolled back: nothing exists.
        const a = await pool.getConnection();
        await a.beginTransaction();
        const [rolled] = await store.enqueue([makeNewJob({ key: 'k-rollback' })], { tx: a });
        expect(rolled!.created).toBe(true);
        expect(await store.getJob(rolled!.job.id)).toBeNull(); // not visible before commit
        await a.rollback();
        a.release();
        expect(await store.getJob(rolled!.job.id)).toBeNull();
        expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);

        // Committed: exists with the id the enqueue returned.
        const b = await pool.getConnection();
        await b.beginTransaction();
        const [committed] = await store.enqueue([makeNewJob({ key: 'k-commit' })], { tx: b });
        await b.commit();
        b.release();
        expect(await store.getJob(committed!.job.id)).toMatchObject({ key: 'k-commit' });

        // REPEATABLE READ caller: its snapshot starts before another connection commits a key;
        // the store's locking read still finds the holder instead of failing on the unique key.
        const c = await pool.getConnection();
        await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await c.beginTransaction();
        await c.query('SELECT COUNT(*) FROM ' + store.tables.jobs); // snapshot taken here
        const [other] = await store.enqueue([makeNewJob({ key: 'k-race' })]);
        const [mine] = await store.enqueue([makeNewJob({ key: 'k-race' })], { tx: c });
        await c.commit();
        c.release();
        expect(mine).toMatchObject({ created: false, job: { id: other!.job.id } });
      } finally {
        await pool.end();
      }
    });

    it('a batch with keys enqueued in one multi-row INSERT returns ids in input order', async () => {
      const { store } = await freshStore();
      const jobs = Array.from({ length: 1200 }, (_, i) =>
        makeNewJob({ payload: { i }, key: i % 100 === 0 ? `key-${i % 300}` : null }),
      );
      const results = await store.enqueue(jobs);
      expect(results).toHaveLength(1200);
      const created = results.filter((r) => r.created);
      // keys key-0, key-100, key-200 repeat every 300 jobs: only their first use creates
      expect(created).toHaveLength(1200 - 9);
      const ids = created.map((r) => Number(r.job.id));
      expect([...ids].sort((x, y) => x - y)).toEqual(ids);
      for (const r of results.slice(0, 50)) {
        const stored = await store.getJob(r.job.id);
        expect(stored?.payload).toEqual(r.job.payload);
      }
      expect(results[300]).toMatchObject({ created: false, job: { id: results[0]!.job.id } });
    });
  });

  describe('ids of a multi-row INSERT when the server spaces auto-increment ids', () => {
    it('bulk enqueue returns the stored ids with auto_increment_increment = 3 (as under Galera)', async () => {
      const { prefix } = await freshStore();
      const pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 2 });
      pool.on('connection', (connection) => {
        connection.query('SET SESSION auto_increment_increment = 3');
      });
      try {
        const store = poolStore(prefix, pool);
        const results = await store.enqueue(
          Array.from({ length: 7 }, (_, i) => makeNewJob({ payload: { i } })),
        );
        const ids = results.map((r) => Number(r.job.id));
        expect(ids[1]! - ids[0]!).toBe(3);
        for (const r of results) {
          const stored = await store.getJob(r.job.id);
          expect(stored?.payload, `job ${r.job.id}`).toEqual(r.job.payload);
        }
        const listed = await store.listJobs({ limit: 10, offset: 0 });
        expect(listed.map((j) => Number(j.id)).sort((a, b) => a - b)).toEqual(ids);
      } finally {
        await pool.end();
      }
    });

    it('each bulk insert uses its own session step: the store pool (1) and a caller transaction (3)', async () => {
      const { store } = await freshStore();
      const expectStored = async (results: Awaited<ReturnType<typeof store.enqueue>>) => {
        for (const r of results) {
          expect((await store.getJob(r.job.id))?.payload, `job ${r.job.id}`).toEqual(r.job.payload);
        }
      };
      await expectStored(
        await store.enqueue([0, 1, 2].map((i) => makeNewJob({ payload: { a: i } }))),
      );
      const connection = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
      try {
        await connection.query('SET SESSION auto_increment_increment = 3');
        await connection.beginTransaction();
        const inTx = await store.enqueue(
          [0, 1, 2].map((i) => makeNewJob({ payload: { tx: i } })),
          { tx: connection },
        );
        await connection.commit();
        await expectStored(inTx);
      } finally {
        await connection.end();
      }
      await expectStored(
        await store.enqueue([0, 1, 2].map((i) => makeNewJob({ payload: { b: i } }))),
      );
    });
  });

  describe('a caller pool with unusual number and date settings', () => {
    it('ids, counts and times come out right with bigNumberStrings and without dateStrings', async () => {
      const { prefix } = await freshStore();
      const pool = mysql.createPool({
        uri: MYSQL_URL,
        database: db.name,
        connectionLimit: 2,
        supportBigNumbers: true,
        bigNumberStrings: true,
        dateStrings: false,
        timezone: 'local',
      });
      try {
        const store = poolStore(prefix, pool);
        const dueAt = new Date('2030-01-02T03:04:05.006Z');
        const results = await store.enqueue([makeNewJob({ dueAt }), makeNewJob({ dueAt })]);
        const ids = results.map((r) => r.job.id);
        expect(Number(ids[1]) - Number(ids[0])).toBe(1);
        const listed = await store.listJobs({ limit: 10, offset: 0 });
        expect(listed.map((j) => j.id)).toEqual(ids);
        expect(listed.map((j) => j.dueAt.toISOString())).toEqual([
          dueAt.toISOString(),
          dueAt.toISOString(),
        ]);
        expect(await store.stats()).toEqual([{ type: 'work', state: 'timer', count: 2 }]);
      } finally {
        await pool.end();
      }
    });
  });

  describe('time zones', () => {
    it('a pool with another session time zone and mysql2 timezone reads and writes the same instants', async () => {
      const { store, prefix } = await freshStore();
      const zoned = mysql.createPool({
        uri: MYSQL_URL,
        database: db.name,
        connectionLimit: 2,
        timezone: '+05:30',
      });
      zoned.on('connection', (connection) => {
        (connection as unknown as { query(s: string): void }).query(
          "SET SESSION time_zone = '-07:00'",
        );
      });
      try {
        const other = poolStore(prefix, zoned);
        // Sanity: the zoned session really is seven hours behind UTC.
        const [offset] = await zoned.query<mysql.RowDataPacket[]>(
          'SELECT TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW()) AS minutes',
        );
        expect(Number(offset[0]?.minutes)).toBe(-420);

        const dueAt = new Date('2031-03-04T05:06:07.089Z');
        const [a] = await other.enqueue([makeNewJob({ dueAt })]);
        expect(a!.job.dueAt.toISOString()).toBe(dueAt.toISOString());
        expect((await store.getJob(a!.job.id))?.dueAt.toISOString()).toBe(dueAt.toISOString());
        expect(String((await readRaw(store, a!.job.id))?.due_at)).toBe('2031-03-04 05:06:07.089');

        // Both stores agree on "now" (the server's UTC clock), within a second of this machine.
        const [n1, n2] = await Promise.all([store.now(), other.now()]);
        expect(Math.abs(n1.getTime() - n2.getTime())).toBeLessThan(1000);
        expect(Math.abs(n1.getTime() - Date.now())).toBeLessThan(5000);

        // A job due in 1 h enqueued through the zoned pool is a timer for the other store too,
        // and one due now is acquirable at once, with a lease measured in UTC.
        const [later, soon] = await other.enqueue([
          makeNewJob({ delayMs: 3_600_000 }),
          makeNewJob({ delayMs: 0 }),
        ]);
        expect(later!.job.state).toBe('timer');
        const got = await store.acquire({
          owner: 'o',
          limit: 10,
          leaseMs: 60_000,
          types: ['work'],
          queues: null,
          tenants: null,
        });
        expect(got.map((j) => j.id)).toEqual([soon!.job.id]);
        const lease = got[0]!.lockExpiresAt!.getTime() - n1.getTime();
        expect(lease).toBeGreaterThan(55_000);
        expect(lease).toBeLessThan(65_000);
        const renewed = await other.renewLeases('o', 120_000, [refOf(got[0]!)]);
        expect(renewed.lost).toEqual([]);
        const raw = await other.getJob(soon!.job.id);
        const renewedLease = raw!.lockExpiresAt!.getTime() - n1.getTime();
        expect(renewedLease).toBeGreaterThan(115_000);
        expect(renewedLease).toBeLessThan(125_000);
      } finally {
        await zoned.end();
      }
    });
  });

  describe('deadlocks and lock wait timeouts', () => {
    it('a real deadlock (1213) in a store transaction is retried transparently and counted', async () => {
      const { store } = await freshStore();
      const [x, y] = await store.enqueue([makeNewJob(), makeNewJob()]);
      const held = await store.acquire({
        owner: 'o',
        limit: 2,
        leaseMs: 60_000,
        types: ['work'],
        queues: null,
        tenants: null,
      });
      const byId = new Map(held.map((j) => [j.id, j]));
      const jobX = byId.get(x!.job.id)!;
      const jobY = byId.get(y!.job.id)!;
      const events: MysqlRetryEvent[] = [];
      store.onRetry((e) => events.push(e));

      // The store locks rows in id order (X, then Y). The other transaction locks Y, then, once
      // the store holds X and waits for Y, asks for X.
      // It has written more (a heavier transaction), so InnoDB picks the store as the victim.
      const other = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
      try {
        await other.query('CREATE TABLE IF NOT EXISTS ballast (n INT PRIMARY KEY)');
        await other.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await other.beginTransaction();
        await other.query(
          `INSERT INTO ballast SELECT seq FROM seq_1_to_200 ON DUPLICATE KEY UPDATE n = n`,
        );
        await other.query(`SELECT id FROM ${store.tables.jobs} WHERE id = ? FOR UPDATE`, [jobY.id]);
        const failing = store.fail([
          {
            ...refOf(jobY),
            error: { message: 'y', stack: null },
            deadletter: false,
            retryDelayMs: 0,
          },
          {
            ...refOf(jobX),
            error: { message: 'x', stack: null },
            deadletter: false,
            retryDelayMs: 0,
          },
        ]);
        // Wait until the store, holding X, runs its update of Y (which then waits for this
        // transaction). The process list shows it; INNODB_TRX is not reliable for this on MariaDB
        // 10.11 (its trx_query can be NULL and trx_state RUNNING while the statement waits).
        for (let i = 0; ; i++) {
          const waits = await sql(
            `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
             WHERE command = 'Query' AND info LIKE ? AND info LIKE ?`,
            [`UPDATE ${store.tables.jobs}%`, `%WHERE id = '${jobY.id}'%`],
          );
          if (Number(waits[0]?.n) > 0) break;
          if (i > 3000) throw new Error('the store never waited for the row lock');
          await sleep(10);
        }
        let otherError: unknown = null;
        try {
          await other.query(`SELECT id FROM ${store.tables.jobs} WHERE id = ? FOR UPDATE`, [
            jobX.id,
          ]);
        } catch (error) {
          otherError = error;
        }
        await other.commit().catch(() => {});
        const result = await failing;
        // Whoever InnoDB chose, a deadlock happened; when it was the store, it retried and won.
        if (process.env.JOBS_TEST_VERBOSE) {
          console.log(
            'deadlock victim:',
            otherError === null ? 'store' : 'other',
            store.retryStats,
          );
        }
        if (otherError === null) {
          expect(result.lost).toEqual([]);
          expect(store.retryStats.deadlockRetries).toBeGreaterThanOrEqual(1);
          expect(events[0]).toMatchObject({ operation: 'fail', reason: 'deadlock', errno: 1213 });
        } else {
          expect((otherError as { errno?: number }).errno).toBe(1213);
          expect(result.lost).toEqual([]);
        }
        expect((await store.getJob(jobX.id))?.state).toBe('timer');
        expect((await store.getJob(jobY.id))?.lastError?.message).toBe('y');
      } finally {
        await other.end();
      }
    });

    it('a lock wait timeout (1205) on a caller pool is retried until the lock is free, and counted', async () => {
      const { prefix } = await freshStore();
      const pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 2 });
      pool.on('connection', (connection) => {
        (connection as unknown as { query(s: string): void }).query(
          'SET SESSION innodb_lock_wait_timeout = 1',
        );
      });
      const store = poolStore(prefix, pool);
      const other = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
      try {
        const [job] = await store.enqueue([makeNewJob()]);
        const [held] = await store.acquire({
          owner: 'o',
          limit: 1,
          leaseMs: 60_000,
          types: ['work'],
          queues: null,
          tenants: null,
        });
        await other.beginTransaction();
        await other.query(`SELECT id FROM ${store.tables.jobs} WHERE id = ? FOR UPDATE`, [
          job!.job.id,
        ]);
        const releasing = store.release([refOf(held!)]);
        // Hold the lock until the store's wait timed out (1 s) and it retried at least once.
        for (let i = 0; store.retryStats.lockWaitRetries === 0; i++) {
          if (i > 3000) throw new Error('the store never reported a lock wait timeout');
          await sleep(10);
        }
        await other.commit();
        expect((await releasing).lost).toEqual([]);
        expect(store.retryStats.lockWaitRetries).toBeGreaterThanOrEqual(1);
        expect((await store.getJob(job!.job.id))?.state).toBe('async');
      } finally {
        await other.end();
        await pool.end();
      }
    });
  });

  describe('the MySQL settle path (no DELETE … RETURNING)', () => {
    it('complete reports exactly the stale and unknown refs as lost', async () => {
      const { store } = await freshStore({ deleteReturning: false });
      await store.enqueue([makeNewJob(), makeNewJob(), makeNewJob()]);
      const held = await store.acquire({
        owner: 'o',
        limit: 3,
        leaseMs: 60_000,
        types: ['work'],
        queues: null,
        tenants: null,
      });
      const [a, b, c] = held as [Job, Job, Job];
      const result = await store.complete([
        refOf(a),
        { id: b.id, token: 'stale' },
        refOf(c),
        { id: '999999', token: 'x' },
        { id: 'not-an-id', token: 'x' },
      ]);
      expect(result.lost.sort()).toEqual([b.id, '999999', 'not-an-id'].sort());
      expect(await store.getJob(a.id)).toBeNull();
      expect(await store.getJob(b.id)).not.toBeNull();
      expect(await store.getJob(c.id)).toBeNull();
    });
  });

  describe('acquisition plan and scope locks', () => {
    it('acquisition walks ix_jobs_acquire in acquisition order, without a filesort', async () => {
      const { store, prefix } = await freshStore();
      // Capture the store's real acquisition statement through a pool that records queries.
      const pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 2 });
      const statements: { sql: string; values: unknown[] }[] = [];
      const getConnection = pool.getConnection.bind(pool);
      pool.getConnection = async () => {
        const connection = await getConnection();
        const query = connection.query.bind(connection) as (...a: unknown[]) => unknown;
        (connection as unknown as { query: (...a: unknown[]) => unknown }).query = (...a) => {
          const first = a[0] as { sql?: string; values?: unknown[] } | string;
          if (typeof first === 'object' && first.sql?.includes('SKIP LOCKED')) {
            statements.push({ sql: first.sql, values: first.values ?? [] });
          }
          return query(...a);
        };
        return connection;
      };
      try {
        const jobs = Array.from({ length: 3000 }, (_, i) =>
          makeNewJob({
            priority: i % 3,
            delayMs: i % 5 === 0 ? 3_600_000 : -i,
            type: i % 2 === 0 ? 'work' : 'other',
          }),
        );
        await store.enqueue(jobs);
        await sql(`ANALYZE TABLE ${store.tables.jobs}`);
        const recording = poolStore(prefix, pool);
        const got = await recording.acquire({
          owner: 'o',
          limit: 10,
          leaseMs: 60_000,
          types: ['work'],
          queues: null,
          tenants: null,
        });
        expect(got).toHaveLength(10);
        const acquireSql = statements.find((s) => s.sql.includes('neg_priority'));
        expect(acquireSql).toBeDefined();
        const connection = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
        try {
          const [plan] = await connection.query<mysql.RowDataPacket[]>(
            `EXPLAIN ${acquireSql!.sql}`,
            acquireSql!.values,
          );
          const outer = plan.find((row) => row.id === 1 && row.table === 'j');
          expect(outer?.key).toBe('ix_jobs_acquire');
          expect(String(outer?.Extra)).not.toMatch(/filesort/);
        } finally {
          await connection.end();
        }
      } finally {
        await pool.end();
      }
    });

    it('a job of a scope becoming head while another acquirer is committing a job of that scope waits (due time crossing now)', async () => {
      const { store, prefix } = await freshStore();
      // Store A's acquisition is held between its checks and its UPDATE by a gate in its pool.
      const pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 2 });
      let openGate: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        openGate = resolve;
      });
      let gated = false;
      let reachedGate: () => void = () => {};
      const atGate = new Promise<void>((resolve) => {
        reachedGate = resolve;
      });
      const getConnection = pool.getConnection.bind(pool);
      pool.getConnection = async () => {
        const connection = await getConnection();
        const query = connection.query.bind(connection) as (...a: unknown[]) => Promise<unknown>;
        (connection as unknown as { query: (...a: unknown[]) => unknown }).query = async (...a) => {
          const first = a[0] as { sql?: string } | string;
          const text = typeof first === 'string' ? first : (first.sql ?? '');
          if (!gated && text.includes("SET state = 'running'")) {
            gated = true;
            reachedGate();
            await gate;
          }
          return query(...a);
        };
        return connection;
      };
      const a = poolStore(prefix, pool);
      const b = peerOf(prefix);
      try {
        const now = await store.now();
        const [y, x] = await store.enqueue([
          makeNewJob({
            scope: 'S',
            exclusive: true,
            priority: 0,
            dueAt: new Date(now.getTime() - 1000),
          }),
          makeNewJob({
            scope: 'S',
            exclusive: true,
            priority: 5,
            dueAt: new Date(now.getTime() + 300),
          }),
        ]);
        const request = {
          owner: 'a',
          limit: 10,
          leaseMs: 60_000,
          types: ['work'],
          queues: null,
          tenants: null,
        };
        // A takes Y (X is not due yet) and stops before its UPDATE, holding the scope's lock.
        const takingY = a.acquire(request);
        await atGate;
        // X becomes due and, by priority, the head of S; Y is not committed as running yet.
        while ((await store.now()).getTime() < now.getTime() + 350) await sleep(20);
        const meanwhile = await b.acquire({ ...request, owner: 'b' });
        expect(meanwhile).toEqual([]);
        openGate();
        expect((await takingY).map((j) => j.id)).toEqual([y!.job.id]);
        // While Y runs, X waits; once Y is done, X goes.
        expect(await b.acquire({ ...request, owner: 'b' })).toEqual([]);
        const [heldY] = await takingY;
        await a.complete([refOf(heldY!)]);
        expect((await b.acquire({ ...request, owner: 'b' })).map((j) => j.id)).toEqual([x!.job.id]);
      } finally {
        openGate();
        await a.close();
        await pool.end();
      }
    });

    it('an exclusive scope whose named lock another acquirer holds is left for the next round', async () => {
      const { store, prefix } = await freshStore();
      const [free, busy, plain] = await store.enqueue([
        makeNewJob({ scope: 'free', exclusive: true }),
        makeNewJob({ scope: 'busy', exclusive: true }),
        makeNewJob(),
      ]);
      const { createHash } = await import('node:crypto');
      const lockName = `jobs_scope_${createHash('sha1').update(`${db.name}.${prefix}\u0000busy`).digest('hex')}`;
      const other = await mysql.createConnection({ uri: MYSQL_URL });
      try {
        const [got] = await other.query<mysql.RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [
          lockName,
        ]);
        expect(Number(got[0]?.got)).toBe(1);
        const request = {
          owner: 'o',
          limit: 10,
          leaseMs: 60_000,
          types: ['work'],
          queues: null,
          tenants: null,
        };
        const first = await store.acquire(request);
        expect(first.map((j) => j.id).sort()).toEqual([free!.job.id, plain!.job.id].sort());
        expect((await store.getJob(busy!.job.id))?.state).toBe('async');
        await other.query('SELECT RELEASE_LOCK(?)', [lockName]);
        const second = await store.acquire(request);
        expect(second.map((j) => j.id)).toEqual([busy!.job.id]);
      } finally {
        await other.end();
      }
    });
  });

  describe('completeAndAcquire', () => {
    it.each([
      ['DELETE … RETURNING (MariaDB)', true],
      ['SELECT … FOR UPDATE then DELETE (MySQL)', false],
    ])(
      'completes held jobs, reports stale ones lost and acquires the next batch in one transaction: %s',
      async (_, deleteReturning) => {
        const { store } = await freshStore({ deleteReturning });
        await store.enqueue(Array.from({ length: 6 }, (_, i) => makeNewJob({ payload: { i } })));
        const request = {
          owner: 'o',
          limit: 2,
          leaseMs: 60_000,
          types: ['work'],
          queues: null,
          tenants: null,
        };
        const first = await store.acquire(request);
        const stale = { id: first[1]!.id, token: 'stale-token' };
        const { lost, jobs } = await store.completeAndAcquire([refOf(first[0]!), stale], request);
        expect(lost).toEqual([first[1]!.id]);
        expect(jobs.map((j) => (j.payload as { i: number }).i)).toEqual([2, 3]);
        expect(await store.getJob(first[0]!.id)).toBeNull();
        expect((await store.getJob(first[1]!.id))?.state).toBe('running');
        const none = await store.completeAndAcquire(jobs.map(refOf), {
          ...request,
          types: ['other'],
        });
        expect(none).toEqual({ lost: [], jobs: [] });
        expect(await store.getJob(jobs[0]!.id)).toBeNull();
      },
    );
  });

  describe('enqueue with a callback-style mysql2 connection', () => {
    it('joins its open transaction through .promise()', async () => {
      const { store } = await freshStore();
      const core = (await import('mysql2')).createConnection({ uri: MYSQL_URL, database: db.name });
      try {
        const p = core.promise();
        await p.beginTransaction();
        const [r] = await store.enqueue([makeNewJob()], { tx: core });
        await p.rollback();
        expect(await store.getJob(r!.job.id)).toBeNull();
      } finally {
        await core.promise().end();
      }
    });
  });
});
