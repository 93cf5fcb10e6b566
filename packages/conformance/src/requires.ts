/**
 * The store's declared capabilities, abilities and optional methods against what its test file
 * requires (`ConformanceOptions.requires`). Tests that need something the store lacks skip
 * themselves, so without this check an ability switched off turns a dozen tests into skips and
 * the run stays green.
 */
import type { JobStore, StoreAbility } from '@jobs/core';
import { expect, it } from 'vitest';
import type { Harness } from './harness.js';
import type { StoreRequirements } from './options.js';

const TITLE =
  'the store declares the capabilities, abilities and optional methods its test file requires';

/**
 * The members each ability must have (`store.ts`): an ability is there whole or not at all.
 * `steps.saveInTransaction` is the one optional member (a transactional variant).
 */
export const ABILITY_MEMBERS: Readonly<Record<StoreAbility, readonly string[]>> = {
  cancellation: ['cancel', 'cancelHeld'],
  rateLimits: ['takeRateTokens', 'deferJobs'],
  history: ['configure', 'get', 'list', 'amend', 'prune'],
  bulk: ['countJobs', 'retryDeadletterMany', 'deleteMany'],
  views: ['overdueTypes', 'queueStats', 'estimateJobs'],
  steps: ['save'],
  waits: ['sleep', 'signal', 'pruneSignals', 'takeSignal', 'waitSignal'],
};

function shown(value: unknown): string {
  return value === undefined ? 'nothing' : JSON.stringify(value);
}

/**
 * What is wrong with the store's ability `name`, one line each: nothing when it is absent or
 * whole; a line per missing member when it is there in part.
 */
export function abilityGaps(store: JobStore, name: StoreAbility): string[] {
  const ability = (store as unknown as Record<string, unknown>)[name];
  if (ability === undefined) return [];
  if (typeof ability !== 'object' || ability === null) {
    return [`${name}: an ability is an object of methods, the store has ${shown(ability)}`];
  }
  const members = ability as Record<string, unknown>;
  return ABILITY_MEMBERS[name]
    .filter((member) => typeof members[member] !== 'function')
    .map((member) => `${name}.${member}(): the ability is there, the method is not`);
}

/**
 * Every difference between `store` and `requires`, one line each; empty when they agree. An
 * absent capability counts as `false` (the contract reads it so); a required ability must be
 * there whole (every member of `ABILITY_MEMBERS`).
 */
export function requirementGaps(store: JobStore, requires: StoreRequirements): string[] {
  const gaps: string[] = [];
  const declared = store.capabilities as unknown as Record<string, unknown>;
  for (const [name, wanted] of Object.entries(requires.capabilities)) {
    const has = declared[name];
    const same = Object.is(has, wanted) || (has === undefined && wanted === false);
    if (!same) {
      gaps.push(
        `capabilities.${name}: the test file requires ${shown(wanted)}, the store declares ${shown(has)}`,
      );
    }
  }
  const members = store as unknown as Record<string, unknown>;
  for (const ability of requires.abilities ?? []) {
    if (members[ability] === undefined) {
      gaps.push(`${ability}: the test file requires the ability, the store has none`);
    } else {
      gaps.push(...abilityGaps(store, ability));
    }
  }
  for (const method of requires.methods ?? []) {
    const [owner, member] = method.includes('.') ? method.split('.') : [null, method];
    const holder =
      owner === null ? members : (members[owner] as Record<string, unknown> | undefined);
    if (typeof holder?.[member as string] !== 'function') {
      gaps.push(`${method}(): the test file requires it, the store has none`);
    }
  }
  return gaps;
}

/** The check, as the suite's first test (or listed as skipped when nothing is required). */
export function requirementsCheck(h: Harness): void {
  const { requires, name } = h.options;
  if (!requires) {
    it.skip(`${TITLE} — skipped: no \`requires\` option, so a capability switched off only skips the tests that need it`, () => {});
    return;
  }
  it(TITLE, { timeout: h.timeout() }, async () => {
    const store = await h.open();
    expect(
      requirementGaps(store, requires),
      `[@jobs/conformance] ${name}: the store differs from its test file's \`requires\``,
    ).toEqual([]);
  });
}
