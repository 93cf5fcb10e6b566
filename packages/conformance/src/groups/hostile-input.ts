import { type Job, JobEngine, type JobStore, silentLogger, ValidationError } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, makeNewJob, refOf, waitFor } from '../harness.js';

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

/** A class whose state JSON cannot see: it would be stored as `{}`. */
class Secret {
  readonly #value = 'hidden';
  reveal(): string {
    return this.#value;
  }
}

/** An array with a hole at index 1 (JSON would store null there). */
function sparse(): unknown[] {
  const list: unknown[] = [1];
  list[2] = 3;
  return list;
}

/**
 * Inputs every engine rejects before the store sees them (`ValidationError`, nothing written);
 * `field`, where given, is the field the error names.
 */
const REJECTED: {
  what: string;
  type: unknown;
  payload?: unknown;
  options?: object;
  field?: string;
}[] = [
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
  // What JSON would change without a word (a Map is stored as {}, a hole as null): refused
  // with the path, where every store once kept a mangled copy.
  {
    what: 'a Map in the payload',
    type: 't',
    payload: { m: new Map([[1, 2]]) },
    field: 'payload.m',
  },
  { what: 'a Set in the payload', type: 't', payload: [new Set([1])], field: 'payload.0' },
  {
    what: 'a typed array in the payload',
    type: 't',
    payload: { bytes: new Uint8Array([1, 2]) },
    field: 'payload.bytes',
  },
  {
    what: 'an ArrayBuffer in the payload',
    type: 't',
    payload: { raw: new ArrayBuffer(8) },
    field: 'payload.raw',
  },
  {
    what: 'a sparse array in the payload',
    type: 't',
    payload: { list: sparse() },
    field: 'payload.list.1',
  },
  {
    what: 'a class instance whose state JSON cannot see',
    type: 't',
    payload: { secret: new Secret() },
    field: 'payload.secret',
  },
  {
    what: 'an invalid Date in the payload',
    type: 't',
    payload: { at: new Date(Number.NaN) },
    field: 'payload.at',
  },
  // A retry cycle is a retry policy: a year at most between attempts, 1,000 retries at most.
  {
    what: 'a retry cycle of millennia (a due time no store holds when the job fails)',
    type: 't',
    options: { retry: 'R3/P8000Y' },
    field: 'retry',
  },
  {
    what: 'a retry cycle of 5,000 retries',
    type: 't',
    options: { retry: 'R5000/PT1M' },
    field: 'retry',
  },
];

/**
 * Names that differ only in spaces around them, or in Unicode normalisation (é as one code point
 * or as e and a combining accent).
 */
const LOOK_ALIKE = ['invoice-7', 'invoice-7 ', ' invoice-7', 'invoice-7  ', '\u00e9', 'e\u0301'];

/**
 * Exact names: two names are the same only when every character is (MySQL's PAD SPACE
 * collations once made `invoice-7 ` the key of `invoice-7`'s job).
 */
function exactNames(h: Harness): void {
  it('keys that differ only in surrounding spaces or normalisation name different jobs', async () => {
    const store = await h.open();
    const first = await enqueueJobs(
      store,
      LOOK_ALIKE.map((key) => ({ key })),
    );
    expect(new Set(first.map((j) => j.id)).size).toBe(LOOK_ALIKE.length);
    for (const [i, key] of LOOK_ALIKE.entries()) {
      expect((await store.getJob(first[i]?.id as string))?.key, JSON.stringify(key)).toBe(key);
    }
    // Each key finds its own job again, and only that one.
    const again = await store.enqueue(LOOK_ALIKE.map((key) => makeNewJob({ key })));
    expect(again.map((r) => r.job.id)).toEqual(first.map((j) => j.id));
    expect(again.map((r) => r.created)).toEqual(LOOK_ALIKE.map(() => false));
  });

  it('types, queues and tenants that differ only in a trailing space are acquired apart', async () => {
    const store = await h.open();
    const [w, wSpace] = await enqueueJobs(store, [{ type: 'w' }, { type: 'w ' }]);
    const [q, qSpace] = await enqueueJobs(store, [{ queue: 'q' }, { queue: 'q ' }]);
    const [t, tSpace] = await enqueueJobs(store, [{ tenantId: 't' }, { tenantId: 't ' }]);
    const ids = (jobs: Job[]) => jobs.map((j) => j.id);
    expect(ids(await acquire(store, { types: ['w'] }))).toEqual([w?.id]);
    expect(ids(await acquire(store, { types: ['w '] }))).toEqual([wSpace?.id]);
    expect(ids(await acquire(store, { queues: ['q'] }))).toEqual([q?.id]);
    expect(ids(await acquire(store, { queues: ['q '] }))).toEqual([qSpace?.id]);
    expect(ids(await acquire(store, { tenants: ['t'] }))).toEqual([t?.id]);
    expect(ids(await acquire(store, { tenants: ['t '] }))).toEqual([tSpace?.id]);
    const listed = await store.listJobs({ type: 'w', limit: 10, offset: 0 });
    expect(ids(listed)).toEqual([w?.id]);
  });

  it('scopes that differ only in a trailing space are limited and suspended apart', async () => {
    const store = await h.open();
    const [acct, acctSpace] = await enqueueJobs(store, [
      { scope: 'acct', exclusive: true },
      { scope: 'acct ', exclusive: true },
    ]);
    // Each scope's one exclusive job may run: neither holds the other's slot.
    const held = await acquire(store, { limit: 10 });
    expect(held.map((j) => j.id).sort()).toEqual([acct?.id, acctSpace?.id].sort());
    const [later] = await enqueueJobs(store, [{ scope: 'acct ', exclusive: true }]);
    expect(await store.suspend({ scope: 'acct' })).toBe(0);
    expect(await store.suspend({ scope: 'acct ' })).toBe(1);
    expect((await store.getJob(later?.id as string))?.state).toBe('suspended');
  });

  it('schedules whose names differ only in a trailing space are separate schedules', async () => {
    const store = await h.open();
    const engine = client(h, store);
    await engine.schedule('nightly', { every: 'PT1H', type: 'a' });
    await engine.schedule('nightly ', { every: 'PT2H', type: 'b' });
    const saved = await store.listSchedules();
    expect(saved.map((s) => s.name).sort()).toEqual(['nightly', 'nightly ']);
    const infos = await engine.admin.listSchedules();
    expect(Object.fromEntries(infos.map((s) => [s.name, s.options.type]))).toEqual({
      nightly: 'a',
      'nightly ': 'b',
    });
    expect(await store.deleteSchedule('nightly ')).toBe(true);
    expect((await store.listSchedules()).map((s) => s.name)).toEqual(['nightly']);
  });

  it('rate-limit keys that differ only in a trailing space are separate windows', async ({
    skip,
  }) => {
    const store = await h.open();
    if (!store.rateLimits) skip('the store keeps no rate limits (no `rateLimits`)');
    const take = async (key: string, want: number) =>
      (await store.rateLimits?.takeRateTokens([{ key, max: 2, perMs: 60_000, want }]))?.[0]
        ?.granted;
    // Two starts per window: 'w ' has its own two, and leaves the one 'w' has left alone.
    expect(await take('w', 1)).toBe(1);
    expect(await take('w ', 2)).toBe(2);
    expect(await take('w', 1)).toBe(1);
    expect(await take('w ', 1)).toBe(0);
  });
}

/**
 * Hostile input: the same input gets the same answer on every store — kept verbatim where
 * accepted, rejected before anything is written where not (DESIGN "Errors and bad input").
 */
export function hostileInputGroup(h: Harness): void {
  exactNames(h);

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
        (error: unknown) =>
          error instanceof ValidationError
            ? `rejected (${input.field === undefined ? 'a field' : error.field})`
            : String(error),
      );
      expect(outcome, input.what).toBe(`rejected (${input.field ?? 'a field'})`);
    }
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('rejects schedules whose jobs could not be stored, and saves nothing', async () => {
    const store = await h.open();
    const engine = client(h, store);
    const bad: [object, string?][] = [
      [{ every: 'PT1M', type: 'n'.repeat(300) }],
      [{ every: 'PT1M', payload: { f: () => 1 } }],
      [{ every: 'PT1M', payload: { n: Number.NaN } }],
      [{ every: 'PT1M', queue: 'q\u0000' }],
      [{ every: 'PT1M', tenantId: '' }],
      // An interval whose next occurrence is after year 9999: no store holds that time (some
      // once saved it, others failed with a StoreError).
      [{ every: 'P8000Y' }, 'every'],
      [{ every: 'PT99999999999999999999H' }, 'every'],
      [{ repeat: 'R/P8000Y' }, 'repeat'],
      [{ repeat: 'R3/+010000-01-01T00:00:00Z/PT1H' }, 'repeat'],
      // Never fires.
      [{ repeat: 'R0/PT1M' }, 'repeat'],
      // Bounded as a job's are.
      [{ every: 'PT1M', retries: 1001 }, 'retries'],
      [{ every: 'PT1M', payload: { byId: new Map([[1, 'a']]) } }, 'payload.byId'],
    ];
    for (const [options, field] of bad) {
      const outcome = await engine.schedule('s', options as never).then(
        () => 'saved',
        (error: unknown) =>
          error instanceof ValidationError
            ? `rejected (${field === undefined ? 'a field' : error.field})`
            : String(error),
      );
      expect(outcome, String(Object.values(options)[0])).toBe(`rejected (${field ?? 'a field'})`);
    }
    for (const name of ['bad\u0000name', 'half \ud83d']) {
      await expect(engine.schedule(name, { every: 'PT1M' }), JSON.stringify(name)).rejects.toThrow(
        expect.objectContaining({ field: 'name' }),
      );
    }
    expect(await store.listSchedules()).toEqual([]);
  });

  it('ids that are not job ids name no job, also beyond 64 bits', async () => {
    const store = await h.open();
    for (const id of ['9999999999999999999', '18446744073709551616', '1e3', ' 1', '0x10', '१']) {
      expect(await store.getJob(id), JSON.stringify(id)).toBeNull();
      expect(await store.deleteJob(id), JSON.stringify(id)).toBe(false);
    }
  });

  it('a getter that throws while the payload is read is refused at its path, with its error as the cause', async () => {
    const store = await h.open();
    const engine = client(h, store);
    const boom = new Error('token unavailable');
    const payload = {
      user: {
        get token(): string {
          throw boom;
        },
      },
    };
    const error = await engine.enqueue('t', payload).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('payload.user.token');
    expect((error as ValidationError).cause).toBe(boom);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('rejects handler, queue and tenant names of an engine as enqueue rejects types', async () => {
    const store = await h.open();
    const handler = async () => {};
    for (const name of ['bad\u0000type', 'bad\ntype', 'n'.repeat(256), '', ' ', 'half \ud83d']) {
      expect(
        () => new JobEngine({ store, logger: silentLogger, handlers: { [name]: handler } }),
        JSON.stringify(name),
      ).toThrow(expect.objectContaining({ name: 'ValidationError', field: 'handlers' }));
    }
    for (const field of ['queues', 'tenants'] as const) {
      for (const name of ['q\u0000', '', 'n'.repeat(256)]) {
        expect(
          () =>
            new JobEngine({
              store,
              logger: silentLogger,
              handlers: { t: handler },
              [field]: [name],
            }),
          `${field} ${JSON.stringify(name)}`,
        ).toThrow(expect.objectContaining({ name: 'ValidationError', field: `${field}.0` }));
      }
    }
  });

  it('a keyed rate limit of a 255-character type and a 200-character key starts its job', async ({
    skip,
  }) => {
    const store = await h.open();
    if (!store.rateLimits) skip('the store keeps no rate limits (no `rateLimits`)');
    const type = 'r'.repeat(255);
    const ran: string[] = [];
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      pollIntervalMs: 50,
      handlers: {
        [type]: {
          handler: async (job) => {
            ran.push(job.id);
          },
          rateLimit: { max: 5, perMs: 60_000, key: () => 'k'.repeat(200) },
        },
      },
    });
    h.defer(() => engine.stop({ timeoutMs: 1_000 }));
    await engine.start();
    const job = await engine.enqueue(type, {});
    await waitFor('the rate-limited job to start', async () => ran.includes(job.id));
  });

  it('history bounds far outside the years a store holds mean what they say on every store', async ({
    skip,
  }) => {
    const store = await h.open();
    if (!store.history) skip('the store keeps no history (no `history`)');
    store.history?.configure({ keep: 'all', retentionMs: 24 * 3_600_000 });
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    expect(held?.id).toBe(job?.id);
    await store.complete([{ ...refOf(held as Job), resultJson: null, durationMs: 1 }]);
    const engine = client(h, store);
    const far = new Date('+100000-01-01T00:00:00Z');
    const before = new Date('-001000-01-01T00:00:00Z');
    const count = async (filter: { since?: Date; until?: Date }) =>
      (await engine.admin.listHistory(filter)).records.length;
    expect(await count({ until: far })).toBe(1);
    expect(await count({ since: before })).toBe(1);
    expect(await count({ since: far })).toBe(0);
    expect(await count({ until: before })).toBe(0);
  });

  it('rejects an owner name no store can hold', async () => {
    const store = await h.open();
    for (const owner of ['o'.repeat(201), 'a\u0000b', '']) {
      expect(() => new JobEngine({ store, owner }), JSON.stringify(owner)).toThrow(ValidationError);
    }
  });
}
