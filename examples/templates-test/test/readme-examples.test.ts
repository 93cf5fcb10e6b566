/** The root README's examples table lists every numbered example, each linked to its folder. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { numberedExamples, REPO } from './workspace.js';

describe('the README', () => {
  it('lists every numbered example in its examples table', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const examples = numberedExamples();
    expect(examples.length).toBeGreaterThanOrEqual(7);
    for (const example of examples) {
      expect(readme, example).toContain(`| [\`${example}\`](examples/${example}) |`);
    }
  });
});
