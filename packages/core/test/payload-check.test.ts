import { describe, expect, it } from 'vitest';
import { ValidationError } from '../src/errors.js';
import { checkPayload, MAX_PAYLOAD_DEPTH } from '../src/rules.js';

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
    // Not plain, but kept as JSON says: toJSON gives what is stored, undefined properties go.
    const at = new Date('2026-11-24T07:00:00.000Z');
    expect(checkPayload({ at, gone: undefined }, 1_000)).toEqual({
      at: '2026-11-24T07:00:00.000Z',
    });
    expect(checkPayload({ toJSON: () => 'mine' }, 1_000)).toBe('mine');
    expect(checkPayload(Buffer.from('hi'), 1_000)).toEqual({ type: 'Buffer', data: [104, 105] });
    // A class instance that is nothing but its fields reads back as those fields.
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
      length(): number {
        return Math.hypot(this.x, this.y);
      }
    }
    expect(checkPayload({ p: new Point(3, 4) }, 1_000)).toEqual({ p: { x: 3, y: 4 } });
    // Shared (not cyclic) references are written out twice, as JSON does.
    const shared = { n: 1 };
    expect(checkPayload({ a: shared, b: [shared] }, 1_000)).toEqual({ a: { n: 1 }, b: [{ n: 1 }] });
    const proto = checkPayload(JSON.parse('{"__proto__": {"x": 1}}'), 1_000) as object;
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    expect(Object.keys(proto)).toEqual(['__proto__']);
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
    refused({ n: 1n }, /^payload\.n$/);
    expect(() => checkPayload(nested(MAX_PAYLOAD_DEPTH), 10_000)).not.toThrow();
    refused(nested(MAX_PAYLOAD_DEPTH + 1), /^payload(\.a)+$/);
    expect(() => checkPayload({ s: 'x'.repeat(100) }, 50)).toThrow(/more than the limit of 50/);
  });

  it('refuses, with the path, what JSON would silently change: Map, Set, binary data, holes, instances it cannot see', () => {
    const refusal = (payload: unknown): ValidationError => {
      try {
        checkPayload(payload, 10_000);
      } catch (error) {
        if (error instanceof ValidationError) return error;
        throw error;
      }
      throw new Error(`accepted ${String(payload)}`);
    };
    const holes: unknown[] = [1];
    holes[2] = 3;
    class Money {
      #cents = 5;
      get cents(): number {
        return this.#cents;
      }
    }
    class Named {
      constructor(readonly first: string) {}
      get full(): string {
        return `${this.first} !`;
      }
    }
    const cyclic: Record<string, unknown> = { a: {} };
    (cyclic.a as Record<string, unknown>).back = cyclic;
    const cases: [unknown, string, RegExp][] = [
      [{ m: new Map([[1, 2]]) }, 'payload.m', /is a Map, which JSON stores as \{\}/],
      [{ s: [new Set([1])] }, 'payload.s.0', /is a Set/],
      [{ w: new WeakMap() }, 'payload.w', /is a WeakMap/],
      [{ b: new Uint8Array([1, 2]) }, 'payload.b', /is a Uint8Array, .*numbered keys/],
      [{ f: new Float64Array(1) }, 'payload.f', /is a Float64Array/],
      [{ buf: new ArrayBuffer(4) }, 'payload.buf', /is an ArrayBuffer/],
      [{ v: new DataView(new ArrayBuffer(2)) }, 'payload.v', /is a DataView/],
      [{ r: /x/ }, 'payload.r', /is a RegExp/],
      [
        { e: new Error('boom') },
        'payload.e',
        /is an Error, which JSON stores as \{\} \(pass its message\)/,
      ],
      [{ n: Object(1) }, 'payload.n', /is a Number/],
      [{ h: holes }, 'payload.h.1', /hole in a sparse array/],
      [{ u: [1, undefined] }, 'payload.u.1', /undefined in an array/],
      [{ money: new Money() }, 'payload.money', /instance of Money without enumerable fields/],
      [{ named: new Named('a') }, 'payload.named', /instance of Named whose getter full/],
      [{ at: new Date(Number.NaN) }, 'payload.at', /invalid Date/],
      [cyclic, 'payload.a.back', /a cycle/],
      [{ big: [10n] }, 'payload.big.0', /BigInt/],
    ];
    for (const [payload, field, message] of cases) {
      const error = refusal(payload);
      expect(error.field, field).toBe(field);
      expect(error.message, field).toMatch(message);
    }
  });

  it('a getter or toJSON that throws is refused at its path, with its error as the cause', () => {
    const boom = new Error('secret unavailable');
    const refusal = (payload: unknown): ValidationError => {
      try {
        checkPayload(payload, 10_000);
      } catch (error) {
        if (error instanceof ValidationError) return error;
        throw error;
      }
      throw new Error('accepted');
    };
    const getter = refusal({
      user: {
        get token(): string {
          throw boom;
        },
      },
    });
    expect(getter.field).toBe('payload.user.token');
    expect(getter.message).toMatch(/threw when read: secret unavailable/);
    expect(getter.cause).toBe(boom);
    const toJSON = refusal({
      x: [
        {
          toJSON() {
            throw boom;
          },
        },
      ],
    });
    expect(toJSON.field).toBe('payload.x.0');
    expect(toJSON.cause).toBe(boom);
    const keys = refusal(
      new Proxy(
        {},
        {
          ownKeys() {
            throw boom;
          },
        },
      ),
    );
    expect(keys.field).toBe('payload');
    expect(keys.cause).toBe(boom);
  });
});
