import { describe, expect, it } from 'vitest';
import { ValidationError } from '../src/errors.js';
import { checkStoreOptions } from '../src/sql/store-options.js';

const KNOWN = ['uri', 'pool', 'max', 'intervalMs'];
const check = (options: unknown, rules?: Parameters<typeof checkStoreOptions>[3]) => () =>
  checkStoreOptions(options, '@jobs/test', KNOWN, rules);

describe('checkStoreOptions', () => {
  it('takes known keys, exactly one connection source and positive integers where asked', () => {
    const rules = { oneOf: ['uri', 'pool'] as const, positiveIntegers: ['max', 'intervalMs'] };
    expect(check({ uri: 'x', max: 4 }, rules)).not.toThrow();
    expect(check({ pool: {}, intervalMs: 20 }, rules)).not.toThrow();
    expect(check({ uri: 'x', extra: 1 }, rules)).toThrow(/extra/);
    expect(check({ uri: 'x', pool: {} }, rules)).toThrow(/exactly one of `uri` or `pool`/);
    expect(check({}, rules)).toThrow(ValidationError);
    for (const bad of [0, -1, 1.5, '4', Number.NaN]) {
      expect(check({ uri: 'x', max: bad }, rules)).toThrow(/max/);
    }
    expect(check(null, rules)).toThrow(/must be an object with `uri` or `pool`/);
  });

  it('still takes the connection pair alone, as in 0.2', () => {
    expect(check({ uri: 'x' }, ['uri', 'pool'])).not.toThrow();
    expect(check({}, ['uri', 'pool'])).toThrow(/exactly one of `uri` or `pool`/);
    expect(check({ max: 0 })).not.toThrow();
  });
});
