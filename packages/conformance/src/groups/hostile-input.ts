import { JobEngine, type JobStore, silentLogger, ValidationError } from '@jobs/core';
import { expect, it } from 'vitest';
import type { Harness } from '../harness.js';

/** A client engine (no handlers) on `store`: enqueue and admin only. */
function client(h: Harness, store: JobStore): JobEngine {
  const engine = new JobEngine({ store, logger: silentLogger });
  h.defer(() => engine.stop({ timeoutMs: 1_000 }));
  return engine;
}

/** `depth` nested single-key objects around `leaf` (a payload `depth` levels deep). */
function nested(depth: number, leaf: unknown = 'bottom'): unknown {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = { d: value };
  return value;
}

const SQL_LOOKING = "x'); DROP TABLE jobs; --";
const LONG = 'n'.repeat(255);

/** Inputs every store must keep verbatim: each is read back exactly as given. */
const ACCEPTED: { what: string; type: string; payload: unknown; options?: object }[] = [
  {
    what: 'emoji and other scripts',
    type: '🚀 rocket — ракета — 火箭',
    payload: { s: '👩‍👩‍👧 ✓ Ω' },
  },
  {
    what: '255-character names',
    type: LONG,
    payload: null,
    options: { key: LONG, scope: LONG, queue: LONG, tenantId: LONG },
  },
  {
    what: 'SQL-looking strings',
    type: SQL_LOOKING,
    payload: { [SQL_LOOKING]: SQL_LOOKING, q: '"\\\'`;' },
    options: { key: SQL_LOOKING, scope: SQL_LOOKING, queue: SQL_LOOKING },
  },
  {
    what: 'tabs, newlines and quotes inside payload strings',
    type: 'text',
    payload: { multi: 'line 1\nline 2\r\n\tindented "quoted" \\ backslash', empty: '' },
  },
  {
    what: 'numbers at the edges of JSON',
    type: 'numbers',
    payload: {
      big: Number.MAX_SAFE_INTEGER,
      small: -Number.MAX_SAFE_INTEGER,
      tiny: 5e-324,
      huge: 1e308,
      zero: 0,
      frac: 0.1,
    },
  },
  { what: 'a payload nested 64 levels deep', type: 'deep', payload: nested(64) },
  {
    what: 'a large payload (900 KB)',
    type: 'large',
    payload: { blob: 'x'.repeat(900_000), list: Array.from({ length: 1000 }, (_, i) => i) },
  },
  { what: 'top-level scalars and arrays', type: 'scalar', payload: [1, 'two', false, null, [3]] },
];

/** Inputs every engine rejects before the store sees them (`ValidationError`, nothing written). */
const REJECTED: { what: string; type: unknown; payload?: unknown; options?: object }[] = [
  { what: 'NUL in the type', type: 'bad\u0000type' },
  { what: 'a newline in the type', type: 'bad\ntype' },
  { what: 'NUL in the key', type: 't', options: { key: 'k\u0000' } },
  { what: 'NUL in the scope', type: 't', options: { scope: '\u0000' } },
  { what: 'NUL in the queue', type: 't', options: { queue: 'q\u0000' } },
  { what: 'NUL in the tenant', type: 't', options: { tenantId: 'x\u0000' } },
  { what: 'an unpaired surrogate in the key', type: 't', options: { key: 'half \ud83d' } },
  { what: 'a 256-character type', type: 'n'.repeat(256) },
  { what: 'a 10,000-character key', type: 't', options: { key: 'k'.repeat(10_000) } },
  { what: 'an empty type', type: '' },
  { what: 'NUL in a payload string', type: 't', payload: { s: 'a\u0000b' } },
  { what: 'NUL in a payload key', type: 't', payload: { 'a\u0000': 1 } },
  { what: 'NaN in the payload', type: 't', payload: { n: Number.NaN } },
  { what: 'Infinity in the payload', type: 't', payload: [Number.POSITIVE_INFINITY] },
  { what: 'a BigInt in the payload', type: 't', payload: { n: 10n } },
  { what: 'a function in the payload', type: 't', payload: { f: () => 1 } },
  { what: 'a payload nested 65 levels deep', type: 't', payload: nested(65) },
  { what: 'a payload over the limit', type: 't', payload: { blob: 'x'.repeat(1024 * 1024) } },
  {
    what: 'a due time after year 9999',
    type: 't',
    options: { runAt: new Date('+010000-01-01T00:00:00Z') },
  },
  {
    what: 'a due time before 1970',
    type: 't',
    options: { runAt: new Date('1969-12-31T23:59:59Z') },
  },
  { what: 'an invalid date', type: 't', options: { runAt: new Date(Number.NaN) } },
  { what: 'an infinite delay', type: 't', options: { delayMs: Number.POSITIVE_INFINITY } },
  { what: 'a negative delay', type: 't', options: { delayMs: -1 } },
  { what: 'a priority that is not an integer', type: 't', options: { priority: 1.5 } },
];

/**
 * Hostile input: the same input gets the same answer on every store — kept verbatim where
 * accepted, rejected before anything is written where not (DESIGN "Errors and bad input").
 */
export function hostileInputGroup(h: Harness): void {
  for (const input of ACCEPTED) {
    it(`keeps ${input.what} verbatim`, async () => {
      const store = await h.open();
      const engine = client(h, store);
      const job = await engine.enqueue(input.type, input.payload, input.options);
      const read = await store.getJob(job.id);
      expect(read?.type).toBe(input.type);
      expect(read?.payload).toEqual(input.payload);
      const options = (input.options ?? {}) as Record<string, unknown>;
      for (const field of ['key', 'scope', 'queue', 'tenantId'] as const) {
        if (options[field] !== undefined) expect(read?.[field], field).toBe(options[field]);
      }
      // Found again by the same values it was stored with.
      if (typeof options.key === 'string') {
        const again = await engine.enqueue(input.type, input.payload, input.options);
        expect(again.id).toBe(job.id);
      }
      const listed = await store.listJobs({ type: input.type, limit: 10, offset: 0 });
      expect(listed.map((j) => j.id)).toEqual([job.id]);
    });
  }

  it('rejects hostile input with a ValidationError naming the field, and writes nothing', async () => {
    const store = await h.open();
    const engine = client(h, store);
    for (const input of REJECTED) {
      const outcome = await engine.enqueue(input.type as string, input.payload, input.options).then(
        (job) => `accepted as job ${job.id}`,
        (error: unknown) => (error instanceof ValidationError ? 'rejected' : String(error)),
      );
      expect(outcome, input.what).toBe('rejected');
    }
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('rejects schedules whose jobs could not be stored, and saves nothing', async () => {
    const store = await h.open();
    const engine = client(h, store);
    const bad: object[] = [
      { every: 'PT1M', type: 'n'.repeat(300) },
      { every: 'PT1M', payload: { f: () => 1 } },
      { every: 'PT1M', payload: { n: Number.NaN } },
      { every: 'PT1M', queue: 'q\u0000' },
      { every: 'PT1M', tenantId: '' },
    ];
    for (const options of bad) {
      await expect(engine.schedule('s', options), JSON.stringify(options)).rejects.toBeInstanceOf(
        ValidationError,
      );
    }
    await expect(engine.schedule('bad\u0000name', { every: 'PT1M' })).rejects.toBeInstanceOf(
      ValidationError,
    );
    expect(await store.listSchedules()).toEqual([]);
  });

  it('ids that are not job ids name no job, also beyond 64 bits', async () => {
    const store = await h.open();
    for (const id of ['9999999999999999999', '18446744073709551616', '1e3', ' 1', '0x10', '१']) {
      expect(await store.getJob(id), JSON.stringify(id)).toBeNull();
      expect(await store.deleteJob(id), JSON.stringify(id)).toBe(false);
    }
  });

  it('rejects an owner name no store can hold', async () => {
    const store = await h.open();
    for (const owner of ['o'.repeat(201), 'a\u0000b', '']) {
      expect(() => new JobEngine({ store, owner }), JSON.stringify(owner)).toThrow(ValidationError);
    }
  });
}
