// The suite on the path the server takes (on MariaDB: `DELETE … RETURNING`); the MySQL 8 path
// runs in conformance-mysql8-path.test.ts, beside it.
import { runMysqlConformance } from './conformance-suite.js';

runMysqlConformance({ name: 'mysql', deleteReturning: undefined });
