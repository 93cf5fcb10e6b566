import { describe, it } from 'vitest';
import { runTypeormConformance } from './conformance.js';
import { serverAvailable } from './databases.js';

if (await serverAvailable('mysql')) runTypeormConformance('mysql');
else describe.skip('typeorm-mysql conformance (server unreachable)', () => it('skipped', () => {}));
