import { describe, it } from 'vitest';
import { runTypeormConformance } from './conformance.js';
import { serverAvailable } from './databases.js';

if (await serverAvailable('better-sqlite3')) runTypeormConformance('better-sqlite3');
else
  describe.skip('typeorm-better-sqlite3 conformance (server unreachable)', () =>
    it('skipped', () => {}));
