import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../src/index.js';
import { acquirePeerRunnerPath, spawnAcquirePeer, spawnEnginePeer } from '../src/process-peer.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const config = { owner: 'child', types: ['work'], limit: 3, leaseMs: 1000, idlePolls: 2 };

describe('process peer runner', () => {
  it('is found from the source tree', () => {
    expect(acquirePeerRunnerPath()).toMatch(/runner[/\\]acquire-peer\.mjs$/);
  });

  it('opens the store, waits for go, acquires until idle and reports every id', async () => {
    const child = spawnAcquirePeer(
      { module: fixture('array-store.mjs'), args: { jobs: 10 } },
      config,
    );
    await child.ready;
    child.go();
    expect(await child.result).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10']);
  });

  it('fails with the child’s error when the module has no createStore', async () => {
    const child = spawnAcquirePeer({ module: fixture('no-factory.mjs') }, config);
    await expect(child.ready).rejects.toThrow(/exports no createStore/);
  });

  it('runs an engine in a child that starts jobs and reports them until it is killed', async () => {
    const child = spawnEnginePeer(
      { module: fixture('memory-with-jobs.mjs'), args: { jobs: 3 } },
      { type: 'work', concurrency: 2, prefetch: 0, leaseMs: 1000 },
    );
    try {
      await child.ready;
      await waitFor('two jobs to start', async () => child.started().length === 2);
      expect(child.started().sort()).toEqual(['1', '2']);
    } finally {
      await child.kill();
    }
  });
});
