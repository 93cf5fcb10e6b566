import { sqliteBackend } from './backends.js';
import { cliSuite } from './suite.js';

cliSuite(sqliteBackend(), 'SQLite', true);
