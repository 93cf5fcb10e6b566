/**
 * Skip switches for what a test needs from the machine (`describeIfAvailable`, `itIfAvailable`,
 * `prerequisite`): locally a missing one is listed as skipped with what is missing in its title;
 * under `CI=true` it is a failing test that names it. Checked on a fixture run by a child vitest.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { runChildVitest } from './child-vitest.js';

const BUILD = 'no build: test/fixtures/no-such-build/index.js missing';

/** `[test, status, first line of each failure]` of every test the child ran, sorted. */
let seen: string[][] = [];
const of = (mode: 'local' | 'CI') =>
  seen.filter(([key]) => key?.startsWith(`${mode}: `) || key?.startsWith(` › ${mode}: `));

describe('prerequisites: missing ones skip locally and fail under CI=true', () => {
  beforeAll(async () => {
    const results = await runChildVitest('test/fixtures/prerequisites.suite.ts');
    seen = [...results]
      .map(([key, o]) => [key, o.status, ...o.failureMessages.map((m) => m.split('\n')[0] ?? '')])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
  }, 60_000);

  it('locally, each missing one is listed as skipped with what is missing in its title', () => {
    expect(of('local')).toEqual([
      [' › local: test needing a tool — skipped: no /nowhere/tool: install it', 'skipped'],
      [' › local: tests added elsewhere — skipped: no server at 127.0.0.1:1: start one', 'skipped'],
      [
        expect.stringMatching(
          `^local: block needing a build — skipped: ${BUILD}.* › runs when everything is there$`,
        ),
        'skipped',
      ],
      ['local: block with everything there › runs', 'passed'],
    ]);
  });

  it('under CI=true, each missing one is a failing test saying what is missing', () => {
    const fails = (title: string, missing: string) =>
      `Error: [@jobs/conformance] ${title}: ${missing}. Under CI=true a missing prerequisite fails instead of skipping.`;
    expect(of('CI')).toEqual([
      [
        ' › CI: test needing a tool — cannot run: no /nowhere/tool: install it',
        'failed',
        fails('CI: test needing a tool', 'no /nowhere/tool: install it'),
      ],
      [
        ' › CI: tests added elsewhere — cannot run: no server at 127.0.0.1:1: start one',
        'failed',
        fails('CI: tests added elsewhere', 'no server at 127.0.0.1:1: start one'),
      ],
      [
        expect.stringMatching(`^CI: block needing a build › cannot run: ${BUILD}`),
        'failed',
        expect.stringMatching(
          `^Error: \\[@jobs/conformance\\] CI: block needing a build: ${BUILD}`,
        ),
      ],
      ['CI: block with everything there › runs', 'passed'],
    ]);
  });
});
