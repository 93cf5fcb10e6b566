/**
 * Loggers. An engine without a `logger` option logs to the console at `info` and above, so a
 * failing database or a job nobody handles is never silent; normal operation logs nothing
 * there. Pass `logger: silentLogger` to turn it off, or your own (pino, winston: anything with
 * debug/info/warn/error).
 */
import type { Logger } from './engine/types.js';

/** Logs nothing. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

type Level = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: readonly Level[] = ['debug', 'info', 'warn', 'error'];

/**
 * Logs to the console from `level` up: one line, `[@jobs] warn: message {"data":…}` (errors
 * as their message).
 *
 * @example
 * new JobEngine({ store, handlers, logger: consoleLogger('debug') });
 */
export function consoleLogger(level: Level = 'info'): Logger {
  const from = LEVELS.indexOf(level);
  const write = (at: Level) => (message: string, data?: Record<string, unknown>) => {
    if (LEVELS.indexOf(at) < from) return;
    const line = `[@jobs] ${at}: ${message}${data ? ` ${describe(data)}` : ''}`;
    if (at === 'error') console.error(line);
    else if (at === 'warn') console.warn(line);
    else console.log(line);
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

function describe(data: Record<string, unknown>): string {
  try {
    return JSON.stringify(data, (_key, value: unknown) =>
      value instanceof Error ? `${value.name}: ${value.message}` : value,
    );
  } catch {
    return String(data);
  }
}
