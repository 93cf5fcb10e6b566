/** createWorkerApi refuses bad options at once, with a message naming what was wrong. */
import { MemoryJobStore } from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { createWorkerApi, type WorkerApiOptions } from '../src/index.js';

const store = new MemoryJobStore();
const token = 'a-token-of-enough-length';
const create = (options: Partial<WorkerApiOptions>) => () =>
  createWorkerApi({ store, clients: [{ token, types: ['a'] }], ...options } as WorkerApiOptions);

describe('createWorkerApi options', () => {
  it('refuses unknown options and bad clients', () => {
    expect(create({ pollMS: 5 } as never)).toThrow(/pollMS.*unknown option/s);
    expect(create({ clients: [] })).toThrow(/at least one/);
    expect(create({ clients: [{ token: 'short', types: ['a'] }] })).toThrow(
      /at least 16 characters/,
    );
    expect(create({ clients: [{ token: `${token} x`, types: ['a'] }] })).toThrow(/visible ASCII/);
    expect(create({ clients: [{ token, types: [] }] })).toThrow(/at least one job type/);
    expect(
      create({
        clients: [
          { token, types: ['a'] },
          { token, types: ['b'] },
        ],
      }),
    ).toThrow(/token of another client/);
    expect(create({ clients: [{ token, types: ['a'], maxAcquire: 0 }] })).toThrow(/maxAcquire/);
    expect(create({ clients: [{ token, types: ['a'], name: 'has space' }] })).toThrow(/name/);
  });

  it('refuses bad limits, leases and retry policies', () => {
    expect(create({ rateLimits: { a: { max: 0, perMs: 1000 } } })).toThrow(/rateLimits\["a"\]/);
    expect(create({ defaultLeaseMs: 50 })).toThrow(/defaultLeaseMs/);
    expect(create({ defaultLeaseMs: 20_000, maxLeaseMs: 10_000 })).toThrow(/above `maxLeaseMs`/);
    expect(create({ retry: 'R5/banana' })).toThrow(/retry/);
    expect(create({ maxBodyBytes: 0 })).toThrow(/maxBodyBytes/);
    expect(create({ history: { keep: 'most' as never } })).toThrow(/history.keep/);
  });

  it('refuses a tracer without startSpan and a link mode other than link or child, naming the option', () => {
    expect(create({ tracer: {} as never })).toThrow(
      expect.objectContaining({ field: 'tracer', message: expect.stringMatching(/startSpan/) }),
    );
    expect(create({ link: 'parent' as never })).toThrow(
      expect.objectContaining({
        field: 'link',
        message: expect.stringMatching(/'link' or 'child'/),
      }),
    );
  });

  it('never puts a token in an error message', () => {
    const secret = 'a-secret-token-value-here';
    try {
      createWorkerApi({ store, clients: [{ token: secret, types: [] }] });
    } catch (error) {
      expect(String((error as Error).message)).not.toContain(secret);
      return;
    }
    throw new Error('expected a refusal');
  });
});
