import { describe, it } from 'vitest';
import { runTypeormConformance } from './conformance.js';
import { serverAvailable } from './databases.js';

if (await serverAvailable('postgres')) runTypeormConformance('postgres');
else
  describe.skip('typeorm-postgres conformance (server unreachable)', () => it('skipped', () => {}));
