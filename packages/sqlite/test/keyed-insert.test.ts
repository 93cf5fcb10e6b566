/**
 * A keyed enqueue whose key's holder finishes before it is read, on every try, gives up after
 * five tries with a message naming this package. A trigger makes every insert of the key a
 * silent no-op, as if a holder took it and finished between the insert and the read.
 */
import Database from 'better-sqlite3';
import { expect, test } from 'vitest';
import { freshFile, newJob, openStore } from './helpers.js';

test('a key that keeps changing hands fails the enqueue with a message naming @jobs/sqlite', async () => {
  const filename = freshFile();
  const store = await openStore({ filename });
  const db = new Database(filename);
  try {
    db.exec(`CREATE TRIGGER lose_key BEFORE INSERT ON jobs_jobs FOR EACH ROW
      WHEN NEW.job_key = 'lost' BEGIN SELECT RAISE(IGNORE); END`);
    await expect(store.enqueue([newJob({ type: 'work', key: 'lost' })])).rejects.toThrow(
      /^\[@jobs\/sqlite\] enqueue: key "lost" kept changing hands: .*, 5 times$/,
    );
    // Other keys are untouched.
    const [other] = await store.enqueue([newJob({ type: 'work', key: 'kept' })]);
    expect(other?.created).toBe(true);
  } finally {
    db.close();
  }
});
