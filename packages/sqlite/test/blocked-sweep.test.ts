/**
 * The blocked-set sweep (`rebalanceScopes()` without scopes, run after each expired-lease
 * recovery pass) reads a bounded number of rows each time and goes on from where it stopped,
 * so with more scopes than one sweep takes, every scope still comes round within a few sweeps.
 */
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { freshFile, newJob, openStore } from './helpers.js';

describe('blocked-set sweep', () => {
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
});
