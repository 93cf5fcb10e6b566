// The suite on the MySQL path (no `DELETE … RETURNING`: completion locks, then deletes) that a
// MySQL 8 server takes, forced on whatever server runs the tests.
import { runMysqlConformance } from './conformance-suite.js';

runMysqlConformance({
  name: 'mysql (no DELETE … RETURNING, as on MySQL 8)',
  deleteReturning: false,
});
