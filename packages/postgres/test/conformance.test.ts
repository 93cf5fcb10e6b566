import { describe, it } from 'vitest';
import { runPostgresConformance } from './conformance-suite.js';
import { PG_URL, reachable } from './helpers.js';

if (reachable) {
  runPostgresConformance({ name: 'postgres', url: PG_URL });
} else {
  describe.skip('JobStore conformance: postgres (no server)', () => {
    it('needs PostgreSQL', () => {});
  });
}
