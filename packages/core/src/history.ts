/**
 * History rules every store shares: how a handler's return value becomes the stored result
 * (JSON, capped), how a history record is built from a job, and the keyset cursor of
 * `admin.listHistory`. Stores only store what they are given.
 */
import { jsonText } from './engine/payload-check.js';
import { ValidationError } from './errors.js';
import type { HistoryKeep, HistoryOutcome, Job, JobHistoryRecord } from './store.js';

/** Largest stored result, in bytes of JSON text; a larger one is replaced by a marker. */
export const HISTORY_RESULT_MAX_BYTES = 64 * 1024;

/** Records deleted per pruning statement: short transactions, no long locks. */
export const HISTORY_PRUNE_BATCH = 1_000;

/**
 * The marker stored instead of a result that cannot be kept as it is — or not yet known
 * (`result-pending`: a child job completed in `ctx.transaction` whose handler has not returned;
 * replaced by what it returns, kept when its process died first).
 */
export interface HistoryResultMarker {
  $jobs: 'result-too-large' | 'result-not-json' | 'result-pending';
  /** Bytes of JSON of the result, when it could be serialised. */
  bytes?: number;
  limit?: number;
  /** Why it could not be serialised. */
  reason?: string;
}

/**
 * JSON text of a handler's return value as history stores it: null for `undefined`; a marker
 * when the value is not JSON every store keeps verbatim (what a payload may not be: functions,
 * `BigInt`, cycles, `Map`s and `Set`s, control characters or unpaired surrogates in strings…;
 * the marker's `reason` names the path) or its JSON is over `maxBytes`. Never throws: a result
 * never keeps a job from completing.
 */
export function historyResultJson(
  value: unknown,
  maxBytes: number = HISTORY_RESULT_MAX_BYTES,
): string | null {
  if (value === undefined) return null;
  let text: string;
  try {
    text = jsonText(value, 'result');
  } catch (error) {
    return marker({ $jobs: 'result-not-json', reason: (error as Error).message });
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) return marker({ $jobs: 'result-too-large', bytes, limit: maxBytes });
  return text;
}

function marker(value: HistoryResultMarker): string {
  return JSON.stringify(value);
}

/** Whether history set to `keep` records a job that ended with `outcome`. */
export function keepsOutcome(keep: HistoryKeep, outcome: HistoryOutcome): boolean {
  return keep === 'all' || (keep === 'failed' && outcome !== 'completed');
}

/** The history record of `job`, finished now with `outcome` (for stores that build it in code). */
export function toHistoryRecord(
  job: Job,
  outcome: HistoryOutcome,
  finishedAt: Date,
  resultJson: string | null | undefined,
  durationMs: number | null | undefined,
): JobHistoryRecord {
  return {
    ...job,
    state: 'finished',
    outcome,
    result: resultJson === null || resultJson === undefined ? null : JSON.parse(resultJson),
    finishedAt,
    durationMs: durationMs ?? null,
    // When its last run started, for a job that ended by running (a measured duration).
    startedAt: durationMs === null || durationMs === undefined ? null : (job.startedAt ?? null),
    lockExpiresAt: null,
    lockToken: null,
    suspendedFrom: null,
    // A finished job has no live request left (as the SQL stores' history reads it).
    cancelRequested: false,
  };
}

/** The opaque `listHistory` cursor pointing after `record`. */
export function historyCursor(record: Pick<JobHistoryRecord, 'finishedAt' | 'id'>): string {
  return Buffer.from(`${record.finishedAt.getTime()}:${record.id}`, 'utf8').toString('base64url');
}

/** Reads a cursor made by `historyCursor`; throws `ValidationError` on anything else. */
export function readHistoryCursor(
  cursor: string,
  field = 'cursor',
): { finishedAt: Date; id: string } {
  const text = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const match = /^(-?\d{1,16}):([0-9A-Za-z_-]{1,200})$/.exec(text);
  if (!match) throw new ValidationError(field, 'is not a cursor returned by listHistory');
  return { finishedAt: new Date(Number(match[1])), id: match[2] as string };
}
