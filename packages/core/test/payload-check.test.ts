import { describe, expect, it } from 'vitest';
import { checkPayload, MAX_PAYLOAD_DEPTH } from '../src/engine/payload-check.js';
import { ValidationError } from '../src/errors.js';

const nested = (depth: number): unknown => {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
};

describe('checkPayload', () => {
  it('gives back what JSON keeps, as a copy: plain data as it is, the rest as JSON has it', () => {
    const plain = { a: [1, 'two', null, true, { b: -0.5 }], 'key with\ttab': 'line\nbreak' };
    const copy = checkPayload(plain, 1_000);
    expect(copy).toEqual(plain);
    expect(copy).not.toBe(plain);
    expect(checkPayload(Object.assign(Object.create(null), { x: 1 }), 1_000)).toEqual({ x: 1 });
    // Not plain: JSON's own rules, as every store reads it back.
    const at = new Date('2026-11-24T07:00:00.000Z');
    expect(checkPayload({ at, gone: undefined, list: [undefined] }, 1_000)).toEqual({
      at: '2026-11-24T07:00:00.000Z',
      list: [null],
    });
    expect(checkPayload({ toJSON: () => 'mine' }, 1_000)).toBe('mine');
    expect(checkPayload(new Map([[1, 2]]), 1_000)).toEqual({});
    const holes: unknown[] = [1];
    holes[2] = 3;
    expect(checkPayload(holes, 1_000)).toEqual([1, null, 3]);
    expect(checkPayload(undefined, 1_000)).toBeNull();
  });

  it('refuses, with the path, what no store keeps, plain-looking or not', () => {
    const refused = (payload: unknown, path: RegExp) => {
      let error: unknown;
      try {
        checkPayload(payload, 10_000);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toMatch(path);
    };
    refused({ a: [1, Number.NaN] }, /^payload\.a\.1$/);
    refused({ a: { b: 'nul\u0000' } }, /^payload\.a\.b$/);
    refused({ a: { 'lone\ud800': 1 } }, /^payload\.a\.lone/);
    refused({ f: () => 1 }, /^payload\.f$/);
    refused({ n: 1n }, /^payload$/);
    expect(() => checkPayload(nested(MAX_PAYLOAD_DEPTH), 10_000)).not.toThrow();
    refused(nested(MAX_PAYLOAD_DEPTH + 1), /^payload(\.a)+$/);
    expect(() => checkPayload({ s: 'x'.repeat(100) }, 50)).toThrow(/more than the limit of 50/);
  });
});
