import { describe } from 'vitest';
import { sqliteBackend } from './backends.js';
import { dashboardSuite } from './suite.js';

describe('dashboard on SQLite', () => dashboardSuite(async () => sqliteBackend()));
