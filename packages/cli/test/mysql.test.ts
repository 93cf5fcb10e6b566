import { mysqlBackend } from './backends.js';
import { cliSuite } from './suite.js';

cliSuite(await mysqlBackend(), 'MySQL/MariaDB');
