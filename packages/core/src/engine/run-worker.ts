/**
 * `runWorker`: the few lines every worker process writes around an engine — start it (after
 * migrating, when asked), stop it gracefully on SIGTERM/SIGINT within a bound, close the store,
 * and exit with a code that says how it went (0 after a graceful stop, 1 when it could not
 * start or did not stop cleanly; a second signal exits at once with 1).
 */
import { consoleLogger } from '../logger.js';
import type { JobEngine } from './engine.js';
import type { Logger } from './types.js';

export interface RunWorkerOptions {
  /** The engine to run, with its handlers. Its store is the one it was built with. */
  engine: JobEngine;
  /** Apply the store's migrations before starting (`store.migrate()`). Default false. */
  migrate?: boolean;
  /** How long a signal's `stop()` lets running jobs finish. Default 30 000. */
  stopTimeoutMs?: number;
  /** Signals that stop the worker. Default `['SIGTERM', 'SIGINT']`. */
  signals?: readonly NodeJS.Signals[];
  /** Close the store once stopped. Default true. */
  closeStore?: boolean;
  /** End the process when done (`process.exit`). Default true; false for tests and embedders. */
  exit?: boolean;
  /** Where it says what it does. Default: a console logger at `info`. */
  logger?: Logger;
}

export interface RunningWorker {
  /** Stops the engine (as a signal would) and closes the store; resolves with the exit code. */
  stop(reason?: string): Promise<number>;
  /** Resolves with the exit code once the worker has stopped (by a signal or `stop()`). */
  readonly stopped: Promise<number>;
}

/**
 * Runs `engine` until SIGTERM or SIGINT: starts it (migrating first with `migrate: true`),
 * then on a signal stops it within `stopTimeoutMs` (running jobs finish or are aborted; the
 * rest is given back), closes the store and exits 0. A start that fails — an unreachable
 * database, a forgotten migration — is logged and exits 1.
 *
 * @example
 * import { JobEngine, runWorker } from '@jobs/core';
 * const engine = new JobEngine({ store, handlers: { 'send-email': sendEmail } });
 * await runWorker({ engine, migrate: true });
 */
export async function runWorker(options: RunWorkerOptions): Promise<RunningWorker> {
  const { engine } = options;
  const logger = options.logger ?? consoleLogger('info');
  const store = engine.store;
  const exit = options.exit ?? true;
  const closeStore = options.closeStore ?? true;
  const stopTimeoutMs = options.stopTimeoutMs ?? 30_000;
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  let finished: (code: number) => void = () => {};
  const stopped = new Promise<number>((resolve) => {
    finished = resolve;
  });
  const end = (code: number): number => {
    for (const signal of signals) process.off(signal, onSignal);
    finished(code);
    if (exit) process.exit(code);
    return code;
  };
  let stopping: Promise<number> | null = null;
  const stop = (reason = 'stop()'): Promise<number> => {
    stopping ??= (async () => {
      logger.info(`stopping (${reason}): running jobs get ${stopTimeoutMs} ms to finish`);
      let code = 0;
      try {
        await engine.stop({ timeoutMs: stopTimeoutMs });
      } catch (error) {
        logger.error('the engine did not stop cleanly', { error });
        code = 1;
      }
      if (closeStore) {
        try {
          await store.close();
        } catch (error) {
          logger.error('the store did not close cleanly', { error });
          code = 1;
        }
      }
      logger.info('stopped');
      return end(code);
    })();
    return stopping;
  };
  function onSignal(signal: NodeJS.Signals): void {
    if (stopping) {
      logger.warn(`${signal} again while stopping: exiting at once`);
      end(1);
      return;
    }
    void stop(signal);
  }
  for (const signal of signals) process.on(signal, onSignal);
  try {
    if (options.migrate) await store.migrate();
    await engine.start();
  } catch (error) {
    logger.error(`could not start: ${error instanceof Error ? error.message : String(error)}`, {
      error,
    });
    if (closeStore) await store.close().catch(() => undefined);
    end(1);
    return { stop: async () => 1, stopped };
  }
  logger.info(`running (${engine.owner}); ${signals.join(' or ')} stops it gracefully`);
  return { stop, stopped };
}
