/**
 * The deadline helpers network stores build on (`@jobs/core/sql` `executor.ts`): timeouts are
 * checked and defaulted in one place, and a call past its deadline fails, destroys what it
 * ran on, and hands a late result back.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../src/index.js';
import {
  CallTimeoutError,
  DEFAULT_CONNECTION_TIMEOUTS,
  resolveConnectionTimeouts,
  withDeadline,
} from '../src/sql/index.js';

describe('resolveConnectionTimeouts', () => {
  it('fills in the defaults and keeps what was given', () => {
    expect(resolveConnectionTimeouts({}, 'x')).toEqual(DEFAULT_CONNECTION_TIMEOUTS);
    expect(resolveConnectionTimeouts({ queryTimeoutMs: 5 }, 'x')).toEqual({
      ...DEFAULT_CONNECTION_TIMEOUTS,
      queryTimeoutMs: 5,
    });
  });

  it('rejects what is not a whole number of milliseconds from 1 to 2^31-1, naming option and package', () => {
    const bad: [string, unknown][] = [
      ['queryTimeoutMs', 0],
      ['connectTimeoutMs', -5],
      ['keepAliveDelayMs', 1.5],
      ['queryTimeoutMs', 2 ** 31],
      ['connectTimeoutMs', '100'],
      ['keepAliveDelayMs', Number.NaN],
    ];
    for (const [option, value] of bad) {
      const resolve = () => resolveConnectionTimeouts({ [option]: value }, '@jobs/x');
      expect(resolve).toThrow(ValidationError);
      expect(resolve).toThrow(new RegExp(`^${option}: \\[@jobs/x\\] must be a whole number`));
    }
  });
});

describe('withDeadline', () => {
  it('settles as the work does when it is in time', async () => {
    const expired: string[] = [];
    await expect(
      withDeadline(Promise.resolve(7), 1_000, 'q', () => expired.push('x')),
    ).resolves.toBe(7);
    const failure = new Error('boom');
    await expect(withDeadline(Promise.reject(failure), 1_000, 'q', () => {})).rejects.toBe(failure);
    expect(expired).toEqual([]);
  });

  it('past the deadline: rejects with CallTimeoutError, calls onExpired, and hands a late result to onLate', async () => {
    let finish: (value: string) => void = () => {};
    const work = new Promise<string>((resolve) => {
      finish = resolve;
    });
    const expired: string[] = [];
    const late: string[] = [];
    const call = withDeadline(
      work,
      20,
      'queryTimeoutMs',
      () => expired.push('destroyed'),
      (v) => late.push(v),
    );
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallTimeoutError);
    expect((error as CallTimeoutError).message).toBe(
      'no answer within 20 ms (queryTimeoutMs); the connection was closed',
    );
    expect(expired).toEqual(['destroyed']);
    finish('connection');
    await work;
    expect(late).toEqual(['connection']);
  });

  it('a late failure after the deadline is swallowed, not reported as unhandled', async () => {
    let fail: (error: Error) => void = () => {};
    const work = new Promise<never>((_, reject) => {
      fail = reject;
    });
    await expect(
      withDeadline(work, 10, 'q', () => fail(new Error('socket destroyed'))),
    ).rejects.toBeInstanceOf(CallTimeoutError);
    await work.catch(() => {});
  });
});
