import { postgresBackend } from './backends.js';
import { cliSuite } from './suite.js';

cliSuite(await postgresBackend(), 'PostgreSQL');
