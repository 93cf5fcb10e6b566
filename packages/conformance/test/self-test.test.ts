/**
 * The suite's self-test: deliberately broken variants of `MemoryJobStore`
 * (`fixtures/broken-stores.ts`) run through the tests that must catch them, in a child vitest
 * limited to those tests, beside the intact store. Each of those tests must fail on its broken
 * store and pass on the intact one, so a green result here cannot come from a run that never
 * happened or from tests that fail for every store.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type Outcome, runChildVitest } from './child-vitest.js';
import { BROKEN_STORES, type BrokenStore, INTACT_STORE } from './fixtures/broken-stores.js';

/** The child's own startup included; it runs only the tests named in `caughtBy`. */
const RUN_TIMEOUT_MS = 120_000;

const key = (store: BrokenStore, title: string): string =>
  `JobStore conformance: ${store.name} › ${title}`;

describe('self-test: broken stores fail the tests that must catch them', () => {
  let outcomes = new Map<string, Outcome>();

  beforeAll(async () => {
    outcomes = await runChildVitest('test/fixtures/broken-stores.suite.ts', {
      titles: INTACT_STORE.caughtBy,
    });
  }, RUN_TIMEOUT_MS);

  for (const store of BROKEN_STORES) {
    for (const title of store.caughtBy) {
      it(`${store.name}: fails “${title}”`, () => {
        const outcome = outcomes.get(key(store, title));
        expect(outcome?.status, `${key(store, title)} did not run`).toBeDefined();
        expect(outcome?.status, key(store, title)).toBe('failed');
        expect(outcome?.failureMessages.join('\n')).toMatch(/AssertionError|expected/i);
      });
    }
  }

  it('the intact store passes every one of those tests', () => {
    const seen = INTACT_STORE.caughtBy.map((title) => [
      title,
      outcomes.get(key(INTACT_STORE, title))?.status ?? 'did not run',
    ]);
    expect(seen).toEqual(INTACT_STORE.caughtBy.map((title) => [title, 'passed']));
  });
});
