/**
 * The engine's metrics: runs started, completed and failed, how long handlers ran, and the
 * queues' depth and oldest due job, read from `store.views.queueStats()` when the meter collects.
 */
import { isWaitingState, type JobStore, type QueueStatsRow } from '@jobs/core';
import {
  type Attributes,
  type BatchObservableCallback,
  diag,
  type Meter,
  ValueType,
} from '@opentelemetry/api';
import {
  ATTR_JOB_OUTCOME,
  ATTR_JOB_STATE,
  ATTR_JOB_TYPE,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_SYSTEM,
  MESSAGING_SYSTEM,
  type RunOutcome,
} from './semconv.js';

/** Run-duration buckets in seconds: from a quick no-op job to a long report. */
const DURATION_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
];

export interface JobMetrics {
  started(type: string, queue: string): void;
  /** A run ended: counts it and records how long its handler ran. */
  ended(type: string, queue: string, outcome: RunOutcome, seconds: number): void;
  /** Stops observing the queues. */
  close(): void;
}

/** One job's type and queue, the attributes of every run metric. */
function runAttributes(type: string, queue: string): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: MESSAGING_SYSTEM,
    [ATTR_JOB_TYPE]: type,
    [ATTR_MESSAGING_DESTINATION_NAME]: queue,
  };
}

export function createJobMetrics(meter: Meter, store: JobStore, statsCacheMs: number): JobMetrics {
  const runCounter = (name: string, description: string) =>
    meter.createCounter(name, { description, unit: '{run}', valueType: ValueType.INT });
  const started = runCounter('jobs.started', 'Job runs started (handler invoked)');
  const completed = runCounter('jobs.completed', 'Job runs that completed');
  const failed = runCounter(
    'jobs.failed',
    'Job runs that failed: retried later or moved to the dead-letter area (jobs.job.outcome)',
  );
  const duration = meter.createHistogram('jobs.run.duration', {
    description: 'How long job handlers ran, by outcome',
    unit: 's',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const stopObserving = observeQueues(meter, store, statsCacheMs);
  return {
    started(type, queue) {
      started.add(1, runAttributes(type, queue));
    },
    ended(type, queue, outcome, seconds) {
      const attributes = runAttributes(type, queue);
      if (outcome === 'completed') completed.add(1, attributes);
      else if (outcome === 'retried' || outcome === 'deadletter') {
        failed.add(1, { ...attributes, [ATTR_JOB_OUTCOME]: outcome });
      }
      duration.record(seconds, { ...attributes, [ATTR_JOB_OUTCOME]: outcome });
    },
    close: stopObserving,
  };
}

/**
 * Observable gauges of the queues: jobs per queue and state, and per queue the age of the
 * oldest due waiting job (0 when none is due). Each collection reuses the last read of
 * `queueStats()` and the store's clock while it is younger than `cacheMs`, so several readers
 * or a short export interval cost the database one read per `cacheMs`. A store without
 * `views` (its `queueStats`) gets no gauges; a read that fails skips one collection.
 */
function observeQueues(meter: Meter, store: JobStore, cacheMs: number): () => void {
  const views = store.views;
  if (!views) {
    diag.debug(`@jobs/otel: the ${store.name} store has no views (queueStats); no queue gauges`);
    return () => undefined;
  }
  const depth = meter.createObservableGauge('jobs.queue.depth', {
    description: 'Jobs in the store, by queue and state',
    unit: '{job}',
    valueType: ValueType.INT,
  });
  const oldestAge = meter.createObservableGauge('jobs.queue.oldest_due.age', {
    description: 'Age of the oldest due waiting (timer or async) job, by queue; 0 when none is due',
    unit: 's',
  });
  type StatsRead = { at: number; rows: QueueStatsRow[]; now: Date };
  let cached: StatsRead | null = null;
  let reading: Promise<StatsRead | null> | null = null;
  const read = (): Promise<StatsRead | null> => {
    if (cached && performance.now() - cached.at < cacheMs) return Promise.resolve(cached);
    reading ??= Promise.all([views.queueStats(), store.now()])
      .then(([rows, now]): StatsRead => {
        cached = { at: performance.now(), rows, now };
        return cached;
      })
      .catch((error: unknown) => {
        diag.warn('@jobs/otel: queueStats() failed; queue gauges skip this collection', error);
        return null;
      })
      .finally(() => {
        reading = null;
      });
    return reading;
  };
  const callback: BatchObservableCallback = async (result) => {
    const stats = await read();
    if (!stats) return;
    const counts = new Map<string, { queue: string; state: string; count: number }>();
    const oldest = new Map<string, number>();
    for (const row of stats.rows) {
      const key = `${row.queue}\u0000${row.state}`;
      const entry = counts.get(key) ?? { queue: row.queue, state: row.state, count: 0 };
      entry.count += row.count;
      counts.set(key, entry);
      const waitingDue = isWaitingState(row.state) && row.due > 0;
      const ageMs = waitingDue ? Math.max(0, stats.now.getTime() - row.oldestDueAt.getTime()) : 0;
      oldest.set(row.queue, Math.max(oldest.get(row.queue) ?? 0, ageMs));
    }
    for (const { queue, state, count } of counts.values()) {
      result.observe(depth, count, {
        [ATTR_MESSAGING_SYSTEM]: MESSAGING_SYSTEM,
        [ATTR_MESSAGING_DESTINATION_NAME]: queue,
        [ATTR_JOB_STATE]: state,
      });
    }
    for (const [queue, ageMs] of oldest) {
      result.observe(oldestAge, ageMs / 1000, {
        [ATTR_MESSAGING_SYSTEM]: MESSAGING_SYSTEM,
        [ATTR_MESSAGING_DESTINATION_NAME]: queue,
      });
    }
  };
  meter.addBatchObservableCallback(callback, [depth, oldestAge]);
  return () => meter.removeBatchObservableCallback(callback, [depth, oldestAge]);
}
