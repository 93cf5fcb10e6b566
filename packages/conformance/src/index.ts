/**
 * `@jobs/conformance`: the vitest suite every `JobStore` must pass, one file per invariant
 * group, plus `FlakyJobStore`, a fault-injecting wrapper, `runScheduleOverlapProcessTest`,
 * a schedule run by engines in two processes, and the chaos kit for stores that talk over a
 * network: `ChaosProxy` (refuse, cut, black-hole, delay), `spawnChaosWorker` (real worker
 * processes whose runs `liveRuns`/`overlappingRuns` check), `runChaosScenarios`,
 * `runDeadlineChecks`, and `DatabaseServer` with `runRestartScenario` (a private server the test
 * crashes and restarts).
 *
 * @example
 * import { runJobStoreConformance } from '@jobs/conformance';
 * import { MyJobStore } from '../src/index.js';
 * runJobStoreConformance({ name: 'mine', createStore: async () => new MyJobStore(freshDatabase()) });
 */
import { type JobStore, STORE_ABILITIES } from '@jobs/core';
import { afterEach, describe } from 'vitest';
import { acquireGroup } from './groups/acquire.js';
import { adminGroup } from './groups/admin.js';
import { batchHandlersGroup } from './groups/batch-handlers.js';
import { blockedSetGroup } from './groups/blocked-set.js';
import { cancellationGroup } from './groups/cancellation.js';
import { childrenGroup } from './groups/children.js';
import { clockGroup } from './groups/clock.js';
import { deadletterGroup } from './groups/deadletter.js';
import { durabilityGroup } from './groups/durability.js';
import { engineGroup } from './groups/engine.js';
import { enqueueGroup } from './groups/enqueue.js';
import { exclusiveGroup } from './groups/exclusive.js';
import { failureGroup } from './groups/failure.js';
import { faultsGroup } from './groups/faults.js';
import { flowsGroup } from './groups/flows.js';
import { handlerTransactionGroup } from './groups/handler-transaction.js';
import { historyGroup } from './groups/history.js';
import { hostileInputGroup } from './groups/hostile-input.js';
import { keyModesGroup } from './groups/key-modes.js';
import { leasesGroup } from './groups/leases.js';
import { lifecycleGroup } from './groups/lifecycle.js';
import { logsGroup } from './groups/logs.js';
import { notificationsGroup } from './groups/notifications.js';
import { operatorViewsGroup } from './groups/operator-views.js';
import { ownershipGroup } from './groups/ownership.js';
import { rateLimitGroup } from './groups/rate-limit.js';
import { recoveryGroup } from './groups/recovery.js';
import { releaseGroup } from './groups/release.js';
import { scheduleEngineGroup } from './groups/schedule-engine.js';
import { schedulesGroup } from './groups/schedules.js';
import { scopeLimitGroup } from './groups/scope-limit.js';
import { sqlEnqueueGroup } from './groups/sql-enqueue.js';
import { startMarksGroup } from './groups/start-marks.js';
import { stepsGroup } from './groups/steps.js';
import { suspensionGroup } from './groups/suspension.js';
import { timersGroup } from './groups/timers.js';
import { transactionsGroup } from './groups/transactions.js';
import { waitsGroup } from './groups/waits.js';
import { Harness } from './harness.js';
import { type ConformanceOptions, GROUP_NAMES, type GroupName } from './options.js';
import { requirementsCheck } from './requires.js';

export {
  type DeadlineCheckOptions,
  type DeadlineSetup,
  type DeadlineStoreRequest,
  runDeadlineChecks,
} from './chaos/deadline-checks.js';
export { type GuaranteeScenarioOptions, runGuaranteeScenarios } from './chaos/guarantee.js';
export { type ChaosMode, ChaosProxy, type ChaosProxyOptions } from './chaos/proxy.js';
export { type RestartScenarioOptions, runRestartScenario } from './chaos/restart.js';
export {
  completions,
  cpuShare,
  type LiveRun,
  liveRuns,
  overlappingRuns,
} from './chaos/runs.js';
export {
  type ChaosScenarioOptions,
  type ChaosSetup,
  type ChaosStoreRequest,
  type HeldSnapshot,
  runChaosScenarios,
} from './chaos/scenarios.js';
export {
  DatabaseServer,
  type DatabaseServerKind,
  type DatabaseServerOptions,
  type DatabaseStopMode,
} from './chaos/server.js';
export {
  type ChaosCpuSample,
  type ChaosEngineOptions,
  type ChaosEvent,
  ChaosWorker,
  type ChaosWorkerSpec,
  type ChaosWorkPlan,
  spawnChaosWorker,
} from './chaos/worker.js';
export {
  type FaultCounts,
  FlakyJobStore,
  type FlakyJobStoreOptions,
  type FlakyMethod,
  InjectedFaultError,
} from './flaky-store.js';
export {
  acquire,
  acquiredAt,
  completeJobs,
  DEFAULT_TIMEOUT_MS,
  enqueueJobs,
  Harness,
  makeNewJob,
  refOf,
  seededRandom,
  sleep,
  storeNow,
  WORK,
  waitFor,
} from './harness.js';
export {
  type ConformanceOptions,
  GROUP_NAMES,
  type GroupName,
  type OptionalStoreMethod,
  type ProcessPeerSpec,
  type StoreRequirements,
  type TransactionHooks,
} from './options.js';
export {
  describeIfAvailable,
  inCi,
  itIfAvailable,
  missingBuild,
  prerequisite,
} from './prerequisites.js';
export { ABILITY_MEMBERS, abilityGaps, requirementGaps } from './requires.js';
export {
  runScheduleOverlapProcessTest,
  type ScheduleOverlapTestOptions,
} from './schedule-overlap.js';

type GroupDefinition = (h: Harness) => void;

const GROUPS: Record<GroupName, { title: string; define: GroupDefinition }> = {
  lifecycle: { title: 'migrate, close, capabilities', define: lifecycleGroup },
  enqueue: { title: 'enqueue: ids, order, fields, unique keys (11)', define: enqueueGroup },
  durability: { title: 'durability across connections (14)', define: durabilityGroup },
  acquire: { title: 'acquire: order (9), filters (10), limit, complete', define: acquireGroup },
  timers: { title: 'timers (5)', define: timersGroup },
  ownership: { title: 'one owner under concurrent acquirers (1)', define: ownershipGroup },
  leases: { title: 'leases and fencing tokens (2, 3)', define: leasesGroup },
  recovery: { title: 'crash recovery of expired leases (4)', define: recoveryGroup },
  'start-marks': {
    title: 'start marks: a lease lapsed before its handler started costs no attempt (4, 21)',
    define: startMarksGroup,
  },
  failure: { title: 'failure and retry (6)', define: failureGroup },
  deadletter: { title: 'dead-letter area (7)', define: deadletterGroup },
  suspension: { title: 'suspension (7)', define: suspensionGroup },
  exclusive: { title: 'exclusive scopes (8)', define: exclusiveGroup },
  'scope-limit': { title: 'scope limit N (18)', define: scopeLimitGroup },
  'blocked-set': {
    title: 'blocked set (18: a full scope costs nothing to others)',
    define: blockedSetGroup,
  },
  'key-modes': { title: 'unique keys: keep, replace, debounce (11)', define: keyModesGroup },
  'rate-limit': { title: 'rate-limit windows and deferral (19)', define: rateLimitGroup },
  release: { title: 'release without an attempt (15)', define: releaseGroup },
  notifications: {
    title: 'wake-ups for subscribers on other connections',
    define: notificationsGroup,
  },
  clock: { title: 'store clock (12)', define: clockGroup },
  transactions: { title: 'transactional enqueue (13)', define: transactionsGroup },
  'handler-transaction': {
    title: "ctx.transaction: a job's effects apply exactly once, fenced by its lease",
    define: handlerTransactionGroup,
  },
  'hostile-input': {
    title: 'hostile input: kept verbatim or rejected before writing, the same on every store',
    define: hostileInputGroup,
  },
  admin: { title: 'admin: get, list, delete, stats', define: adminGroup },
  history: {
    title: 'history: finished jobs recorded with their outcome, listed, pruned; bulk actions',
    define: historyGroup,
  },
  cancellation: {
    title: 'cancellation and progress: through lease renewal, on every store (20)',
    define: cancellationGroup,
  },
  logs: { title: 'job logs (ctx.log) and per-job time limits', define: logsGroup },
  steps: {
    title: 'durable steps (23): checkpoints fenced by the lease, memoised across runs',
    define: stepsGroup,
  },
  waits: {
    title: 'durable waits (23): ctx.sleep frees the worker, fenced by the lease',
    define: waitsGroup,
  },
  children: {
    title: 'child jobs: ctx.run awaits a child without holding the worker, fan-in, cancel cascade',
    define: childrenGroup,
  },
  flows: {
    title: 'flows and batches: a DAG of jobs in dependency order, skips, a batch callback',
    define: flowsGroup,
  },
  'batch-handlers': {
    title:
      'batch handlers: jobs run in batches, each settled as a single run (own lease, outcome, cancel)',
    define: batchHandlersGroup,
  },
  'operator-views': {
    title: 'operator views: queue stats (optional)',
    define: operatorViewsGroup,
  },
  schedules: {
    title: 'schedules: upsert, versioned save, due, compare-and-set fire, overlap',
    define: schedulesGroup,
  },
  'schedule-engine': { title: 'schedules fired by racing runners', define: scheduleEngineGroup },
  engine: { title: 'a real JobEngine on the store', define: engineGroup },
  faults: { title: 'engines on the store with 20% injected faults', define: faultsGroup },
  'sql-enqueue': {
    title: 'enqueue from SQL: the same job as engine.enqueue (24)',
    define: sqlEnqueueGroup,
  },
};

/** Why a group cannot run with these options, or null. */
function automaticSkip(group: GroupName, options: ConformanceOptions<JobStore>): string | null {
  if (group === 'transactions' && !options.transaction) {
    return 'no `transaction` hooks given (the store has no transactional enqueue)';
  }
  if (group === 'handler-transaction' && !options.handlerTransaction) {
    return 'no `handlerTransaction` hooks given (the store has no ctx.transaction)';
  }
  if (group === 'notifications' && !options.connectPeer) {
    return 'no `connectPeer` given: wake-ups are checked across connections';
  }
  if (group === 'sql-enqueue' && !options.sqlEnqueue) {
    return 'no `sqlEnqueue` given (the store has no SQL enqueue entry point)';
  }
  if (group === 'durability' && !options.connectPeer) {
    return 'no `connectPeer` given: durability is checked by reading through a new connection';
  }
  return null;
}

function validateOptions(options: ConformanceOptions<JobStore>): void {
  if (!options || typeof options.name !== 'string' || options.name === '') {
    throw new TypeError(
      '[@jobs/conformance] runJobStoreConformance: `name` must be a non-empty string',
    );
  }
  if (typeof options.createStore !== 'function') {
    throw new TypeError(
      '[@jobs/conformance] runJobStoreConformance: `createStore` must be a function',
    );
  }
  for (const [group, reason] of Object.entries(options.skip ?? {})) {
    if (!(GROUP_NAMES as readonly string[]).includes(group)) {
      throw new TypeError(
        `[@jobs/conformance] runJobStoreConformance: skip.${group} is not a group (groups: ${GROUP_NAMES.join(', ')})`,
      );
    }
    if (typeof reason !== 'string' || reason.trim() === '') {
      throw new TypeError(
        `[@jobs/conformance] runJobStoreConformance: skip.${group} needs a reason (a non-empty string)`,
      );
    }
  }
  if (options.readRaw !== undefined && options.readRawJob !== undefined) {
    throw new TypeError(
      '[@jobs/conformance] runJobStoreConformance: give `readRaw` (a SQL row) or `readRawJob` (a stored Job), not both',
    );
  }
  for (const field of ['readRaw', 'readRawJob'] as const) {
    const value = options[field];
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(
        `[@jobs/conformance] runJobStoreConformance: \`${field}\` must be a function`,
      );
    }
  }
  validateRequirements(options.requires);
  for (const field of ['rounds', 'peers', 'processes', 'timeoutMs'] as const) {
    const value = options[field];
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      throw new TypeError(
        `[@jobs/conformance] runJobStoreConformance: ${field} must be a positive integer`,
      );
    }
  }
}

function validateRequirements(requires: ConformanceOptions<JobStore>['requires']): void {
  if (requires === undefined) return;
  const where = '[@jobs/conformance] runJobStoreConformance: requires';
  if (typeof requires !== 'object' || requires === null) {
    throw new TypeError(`${where} must be an object ({ capabilities, abilities?, methods? })`);
  }
  const { capabilities, abilities, methods } = requires;
  if (typeof capabilities !== 'object' || capabilities === null || Array.isArray(capabilities)) {
    throw new TypeError(`${where}.capabilities must be an object of capability values`);
  }
  if (abilities !== undefined) {
    const known = new Set<string>(STORE_ABILITIES);
    if (!Array.isArray(abilities) || abilities.some((a) => !known.has(a))) {
      throw new TypeError(
        `${where}.abilities must be an array of ability names (${STORE_ABILITIES.join(', ')})`,
      );
    }
  }
  if (methods !== undefined) {
    if (!Array.isArray(methods) || methods.some((m) => typeof m !== 'string' || m === '')) {
      throw new TypeError(`${where}.methods must be an array of method names`);
    }
  }
}

/**
 * Defines the conformance suite for a store in the calling vitest file: one `describe` per
 * invariant group, a fresh store per test.
 *
 * @example
 * runJobStoreConformance({
 *   name: 'sqlite',
 *   createStore: async () => new SqliteJobStore({ filename: freshFile() }),
 *   connectPeer: async (store) => new SqliteJobStore({ filename: store.filename }),
 *   requires: { capabilities: { progress: true }, abilities: ['cancellation', 'views'] },
 *   skip: { transactions: 'reason why' },
 * });
 */
export function runJobStoreConformance<S extends JobStore, Tx = unknown>(
  options: ConformanceOptions<S, Tx>,
): void {
  const base = options as unknown as ConformanceOptions<JobStore>;
  validateOptions(base);
  const harness = new Harness<S>(options as unknown as ConformanceOptions<S>);
  // The suite sets every time limit itself (never vitest's testTimeout/hookTimeout, 5 s by
  // default): each group gives its tests `timeoutMs`, heavier tests pass a multiple of it.
  const timeout = harness.timeout();
  describe(`JobStore conformance: ${options.name}`, () => {
    afterEach(async () => {
      await harness.cleanup();
    }, timeout);
    requirementsCheck(harness as unknown as Harness);
    for (const group of GROUP_NAMES) {
      const { title, define } = GROUPS[group];
      const reason = options.skip?.[group] ?? automaticSkip(group, base);
      if (reason !== null && reason !== undefined) {
        // The group's tests are still listed, as skipped, under a title that gives the reason.
        describe.skip(`${group}: ${title} — skipped: ${reason}`, { timeout }, () => {
          define(harness as unknown as Harness);
        });
        continue;
      }
      describe(`${group}: ${title}`, { timeout }, () => {
        define(harness as unknown as Harness);
      });
    }
  });
}
