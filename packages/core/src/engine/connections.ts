/**
 * How many store calls an engine makes at once, and telling the store (`reserveConnections`),
 * so a pooled store's default pool fits the engine and a pool sized too small is said once.
 */
import type { EngineRuntime } from './runtime.js';

/**
 * Store calls an engine makes at once on the store's pool besides its handlers', counted from
 * the code: the acquisition loop (acquisitions and, one after another, its housekeeping: clock
 * sync, lease recovery, schedules, rate limits) 1; history pruning in the background 1;
 * settlement writing completions, failures, releases and cancellations side by side 4. Lease
 * renewals run on a connection of their own in every pooled store. Each handler makes one call
 * at a time (`ctx.transaction` holds its connection until it commits), so an engine may use
 * `concurrency + ENGINE_CONNECTIONS` at once.
 */
export const ENGINE_CONNECTIONS = 6;

/**
 * Reserves the connections this engine may use on the store's pool; logs one warning, naming
 * both numbers, when the pool is smaller. Returns the function that gives them back.
 */
export function reserveConnections(rt: EngineRuntime): () => void {
  const { store, concurrency, logger } = rt.options;
  if (!store.reserveConnections) return () => {};
  const reservation = store.reserveConnections(concurrency + ENGINE_CONNECTIONS);
  const { poolSize, needed, sizeOption } = reservation;
  if (poolSize !== null && poolSize < needed) {
    logger.warn(
      `the ${store.name} store's pool holds ${poolSize} connections, fewer than the ${needed} its engines may use at once (this one: concurrency ${concurrency} + ${ENGINE_CONNECTIONS} of its own): handlers using ctx.transaction that call the store again wait for a connection until it times out; set ${sizeOption} to at least ${needed}`,
      { poolSize, needed, concurrency },
    );
  }
  return () => reservation.release();
}
