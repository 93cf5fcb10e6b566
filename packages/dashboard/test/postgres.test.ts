import { describe } from 'vitest';
import { postgresBackend } from './backends.js';
import { dashboardSuite } from './suite.js';

describe('dashboard on PostgreSQL', () => dashboardSuite(postgresBackend));
