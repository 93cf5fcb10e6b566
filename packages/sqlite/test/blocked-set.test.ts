/**
 * Bounds of the blocked sets, read around the store on a real SQLite file: the sweep
 * (`rebalanceScopes()` without scopes, run after each expired-lease recovery pass) takes a
 * bounded number of scopes each time and goes on from where it stopped, so with more scopes
 * than one sweep takes, every scope still comes round within a few sweeps; and a rebalance
 * blocks a bounded number of jobs per call, so a settle never pays for a whole burst.
 */
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { freshFile, newJob, openStore } from './helpers.js';

describe('blocked-set bounds', () => {
  test('a sweep takes a bounded share of the scopes and comes round to all of them in turn', async () => {
    const filename = freshFile();
    const store = await openStore({ filename });
    const scopes = 1_200;
    await store.enqueue(
      Array.from({ length: scopes }, (_, i) =>
        newJob({ scope: `s${String(i).padStart(5, '0')}`, exclusive: true }),
      ),
    );
    // What a lost race leaves behind: each scope's only job blocked while its slot is free.
    const db = new Database(filename);
    db.prepare(`UPDATE jobs_jobs SET state = 'blocked'`).run();
    db.close();
    const request = { owner: 'o', leaseMs: 30_000, types: ['work'], queues: null, tenants: null };
    expect(await store.acquire({ ...request, limit: 10 })).toEqual([]);

    const letIn: number[] = [];
    for (let sweep = 0; sweep < 20 && letIn.reduce((a, b) => a + b, 0) < scopes; sweep++) {
      letIn.push(await store.rebalanceScopes());
    }
    // Bounded: no sweep takes every scope at once; in turn: all are back within a few sweeps.
    expect(Math.max(...letIn)).toBeLessThan(scopes);
    expect(letIn.reduce((a, b) => a + b, 0)).toBe(scopes);
    expect(letIn.length).toBeLessThanOrEqual(10);
    const blocked = (await store.stats()).filter((row) => row.state === 'blocked');
    expect(blocked).toEqual([]);
    const acquired = await store.acquire({ ...request, limit: 1_000 });
    expect(acquired.length).toBe(1_000);
  });

  test('a rebalance blocks a bounded number of jobs per call, and a burst over the next calls', async () => {
    const filename = freshFile();
    const store = await openStore({ filename });
    const request = { owner: 'o', leaseMs: 30_000, types: ['work'], queues: null, tenants: null };
    await store.enqueue([newJob({ scope: 's', exclusive: true })]);
    expect((await store.acquire({ ...request, limit: 10 })).length).toBe(1);
    // A burst that came in without a rebalance: timers of the full scope, all come due at once.
    const burst = 5_000;
    await store.enqueue(
      Array.from({ length: burst }, () =>
        newJob({ scope: 's', exclusive: true, delayMs: 3_600_000 }),
      ),
    );
    const db = new Database(filename);
    db.prepare(`UPDATE jobs_jobs SET due_at = due_at - 7200000 WHERE state = 'timer'`).run();
    const blocked = (): number =>
      (
        db.prepare(`SELECT COUNT(*) AS n FROM jobs_jobs WHERE state = 'blocked'`).get() as {
          n: number;
        }
      ).n;
    const counts: number[] = [];
    for (let call = 0; call < 10; call++) {
      await store.rebalanceScopes(['s']);
      counts.push(blocked());
      if (counts.length > 1 && counts.at(-1) === counts.at(-2)) break;
    }
    db.close();
    // Bounded: the first call blocked part of the burst; all but a short queue in the end.
    expect(counts[0]).toBeGreaterThan(0);
    expect(counts[0]).toBeLessThan(burst / 2);
    expect(counts.at(-1)).toBeGreaterThan(burst - 200);
    expect(counts.at(-1)).toBeLessThan(burst);
  });
});
