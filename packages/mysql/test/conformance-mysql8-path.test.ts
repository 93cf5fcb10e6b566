// The suite on the MySQL path (no `DELETE … RETURNING`: completion locks, then deletes) that a
// MySQL 8 server takes, forced on whatever server runs the tests. Only completion differs on
// this path (`ops.complete`; with history both paths share `ops.completeWithHistory`), so the
// groups that complete jobs run here; the others run on the server's own path
// (conformance.test.ts) and would only repeat it.
import type { GroupName } from '@jobs/conformance';
import { runMysqlConformance } from './conformance-suite.js';

const SAME_PATH = 'no completion in it: the same statements as conformance.test.ts, which runs it';
const ENGINES =
  'engines keep history, so they complete through ops.completeWithHistory, the same on both paths; its store calls (saveSteps, sleep, takeSignal) have no completion in them';
const skip: Partial<Record<GroupName, string>> = {
  enqueue: SAME_PATH,
  durability: SAME_PATH,
  acquire: SAME_PATH,
  timers: SAME_PATH,
  recovery: SAME_PATH,
  suspension: SAME_PATH,
  'key-modes': SAME_PATH,
  'rate-limit': SAME_PATH,
  notifications: SAME_PATH,
  clock: SAME_PATH,
  transactions: SAME_PATH,
  admin: SAME_PATH,
  'operator-views': SAME_PATH,
  'hostile-input': SAME_PATH,
  'handler-transaction': SAME_PATH,
  logs: SAME_PATH,
  schedules: SAME_PATH,
  'schedule-engine': SAME_PATH,
  engine: ENGINES,
  faults: ENGINES,
  steps: ENGINES,
  waits: ENGINES,
  flows: ENGINES,
  'batch-handlers': ENGINES,
  'sql-enqueue': SAME_PATH,
};
runMysqlConformance({
  name: 'mysql (no DELETE … RETURNING, as on MySQL 8)',
  deleteReturning: false,
  skip,
});
