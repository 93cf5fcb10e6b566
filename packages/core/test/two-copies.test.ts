/**
 * Two copies of @jobs/core in one process — the ESM build beside the CJS build, as an app that
 * mixes `import` and `require` gets — still agree on their errors: each class recognises the
 * other copy's errors by their brand. The builds are made from the current sources into a temp
 * directory (the same tsup build as `dist/`), so the test never runs a stale `dist`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'tsup';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

type Core = typeof import('../src/index.js');

const root = fileURLToPath(new URL('..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'jobs-core-two-copies-'));
let esm: Core;
let cjs: Core;

beforeAll(async () => {
  await build({
    config: false,
    entry: { index: join(root, 'src/index.ts'), 'sql/index': join(root, 'src/sql/index.ts') },
    format: ['esm', 'cjs'],
    splitting: true,
    loader: { '.sql': 'text' },
    target: 'node20',
    outDir: out,
    dts: false,
    silent: true,
  });
  esm = (await import(pathToFileURL(join(out, 'index.js')).href)) as Core;
  cjs = createRequire(import.meta.url)(join(out, 'index.cjs')) as Core;
}, 60_000);

afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('two copies of @jobs/core (ESM and CJS builds together)', () => {
  it('are two copies: their classes differ', () => {
    expect(esm.UnrecoverableError).not.toBe(cjs.UnrecoverableError);
    expect(Object.getPrototypeOf(new cjs.UnrecoverableError('x'))).not.toBe(
      esm.UnrecoverableError.prototype,
    );
  });

  it('an engine of one copy sends a job that throws the other copy’s UnrecoverableError to the dead-letter area after one attempt', async () => {
    const store = new esm.MemoryJobStore();
    let attempts = 0;
    const engine = new esm.JobEngine({
      store,
      logger: esm.silentLogger,
      handlers: {
        doomed: () => {
          attempts += 1;
          throw new cjs.UnrecoverableError('no such user');
        },
      },
    });
    await engine.start();
    try {
      const job = await engine.enqueue('doomed', {}, { retries: 3 });
      const deadline = Date.now() + 10_000;
      while ((await store.getJob(job.id))?.state !== 'deadletter') {
        if (Date.now() > deadline)
          throw new Error(`job ended ${JSON.stringify(job)}, attempts ${attempts}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const dead = await store.getJob(job.id);
      expect(attempts).toBe(1);
      expect(dead?.retriesLeft).toBe(3);
      expect(dead?.lastError?.message).toBe('no such user');
    } finally {
      await engine.stop({ timeoutMs: 1000 });
    }
  });

  it('instanceof recognises every error class across copies, both ways, and nothing else', () => {
    const made = (core: Core) => ({
      JobsError: new core.JobsError('STORE', 'x'),
      ValidationError: new core.ValidationError('tx', 'x'),
      LockLostError: new core.LockLostError('1'),
      UnrecoverableError: new core.UnrecoverableError('x'),
      CancelledError: new core.CancelledError('1'),
      StoreError: new core.StoreError('x'),
      NotFoundError: new core.NotFoundError('x'),
      InvalidStateError: new core.InvalidStateError('x'),
    });
    const names = Object.keys(made(esm)) as (keyof ReturnType<typeof made>)[];
    for (const [from, to] of [
      [esm, cjs],
      [cjs, esm],
    ] as const) {
      const errors = made(from);
      for (const made of names) {
        for (const asked of names) {
          // Every error is a JobsError; otherwise only its own class matches.
          const expected = asked === made || asked === 'JobsError';
          expect(errors[made] instanceof to[asked], `${made} instanceof ${asked}`).toBe(expected);
        }
        expect(errors[made] instanceof Error).toBe(true);
      }
      expect(new Error('plain') instanceof to.JobsError).toBe(false);
      expect({ name: 'UnrecoverableError', code: 'UNRECOVERABLE' } instanceof to.JobsError).toBe(
        false,
      );
      expect((null as unknown) instanceof to.UnrecoverableError).toBe(false);
    }
  });

  it("a user's subclass is recognised as itself and as ours, and our errors are not taken for it", () => {
    class PaymentDeclined extends cjs.UnrecoverableError {}
    const declined = new PaymentDeclined('card declined');
    expect(declined instanceof PaymentDeclined).toBe(true);
    expect(declined instanceof esm.UnrecoverableError).toBe(true);
    expect(declined instanceof esm.JobsError).toBe(true);
    expect(new esm.UnrecoverableError('x') instanceof PaymentDeclined).toBe(false);
    expect(new cjs.UnrecoverableError('x') instanceof PaymentDeclined).toBe(false);
  });
});
