/**
 * `PoolSizing`: the engines' reservations on a store's pool. A default-sized pool follows them
 * (never below the default); a size the caller chose is only reported.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_POOL_SIZE, PoolSizing } from '../src/sql/pool-size.js';

describe('PoolSizing', () => {
  it('grows a default pool to every reservation held plus the store’s own, and back', () => {
    let size = DEFAULT_POOL_SIZE;
    const sizing = new PoolSizing({
      size: () => size,
      resize: (n) => {
        size = n;
      },
      own: 1,
      sizeOption: '`connectionLimit`',
    });
    const a = sizing.reserve(26);
    expect(a).toMatchObject({ poolSize: 27, needed: 27, sizeOption: '`connectionLimit`' });
    const b = sizing.reserve(10);
    expect(b).toMatchObject({ poolSize: 37, needed: 37 });
    a.release();
    a.release(); // twice changes nothing
    expect(size).toBe(11);
    b.release();
    expect(size).toBe(DEFAULT_POOL_SIZE);
  });

  it('keeps a size the caller chose and reports it below what is needed', () => {
    const sizing = new PoolSizing({ size: () => 8, own: 0, sizeOption: '`max`' });
    expect(sizing.reserve(26)).toMatchObject({ poolSize: 8, needed: 26 });
  });
});
