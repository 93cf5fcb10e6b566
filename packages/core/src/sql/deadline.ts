/**
 * Deadlines for the calls of a store that talks to its database over a network (invariant 16).
 * A server-side timeout (`statement_timeout`) never fires when the network drops packets
 * silently, and a pool hands out a dead socket as readily as a live one, so an executor bounds
 * each connect and each statement on the client and, when one passes its deadline, destroys
 * that connection: the call fails, and the pool never keeps a socket that will not answer.
 */
import { ValidationError } from '../errors.js';

/** Deadlines and TCP keepalive of a network store's connections. */
export interface ConnectionTimeouts {
  /** Opening a connection, or waiting for a free one in the pool. */
  connectTimeoutMs: number;
  /** One statement, from sending it to its last row; also a server-side bound where it has one. */
  queryTimeoutMs: number;
  /** Idle time on a connection before the operating system starts TCP keepalive probes. */
  keepAliveDelayMs: number;
}

/** The defaults: a minute-long outage costs a few failed calls, never a hung one. */
export const DEFAULT_CONNECTION_TIMEOUTS: Readonly<ConnectionTimeouts> = Object.freeze({
  connectTimeoutMs: 10_000,
  queryTimeoutMs: 30_000,
  keepAliveDelayMs: 10_000,
});

/** The longest delay a Node timer keeps (a longer one fires at once). */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * The timeouts among a store's options, checked (whole milliseconds, 1 up to about 24 days)
 * and with the defaults filled in. `label` names the package in messages.
 *
 * @example
 * const timeouts = resolveConnectionTimeouts(options, '@jobs/postgres');
 */
export function resolveConnectionTimeouts(
  options: { [K in keyof ConnectionTimeouts]?: unknown },
  label: string,
): ConnectionTimeouts {
  const resolved = { ...DEFAULT_CONNECTION_TIMEOUTS };
  for (const field of Object.keys(resolved) as (keyof ConnectionTimeouts)[]) {
    const value = options[field];
    if (value === undefined) continue;
    if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < 1 ||
      value > MAX_TIMER_MS
    ) {
      throw new ValidationError(
        field,
        `[${label}] must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${String(value)}`,
      );
    }
    resolved[field] = value;
  }
  return resolved;
}

/** A store call that passed its deadline; the connection it ran on was destroyed. */
export class CallTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';

  constructor(
    /** The deadline, in ms. */
    readonly timeoutMs: number,
    /** The option that set it, e.g. `queryTimeoutMs`. */
    readonly option: string,
  ) {
    super(`no answer within ${timeoutMs} ms (${option}); the connection was closed`);
    this.name = 'CallTimeoutError';
  }
}

/**
 * Settles as `work` does, unless `timeoutMs` pass first: then rejects with a `CallTimeoutError`
 * and calls `onExpired` (destroy the connection, so `work` fails too and frees what it holds).
 * A result that arrives after the deadline goes to `onLate` (a pooled connection handed out
 * late is given back).
 *
 * @example
 * const client = await withDeadline(pool.connect(), 10_000, 'connectTimeoutMs', () => {}, (late) => late.release());
 */
export function withDeadline<T>(
  work: Promise<T>,
  timeoutMs: number,
  option: string,
  onExpired: () => void,
  onLate?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      reject(new CallTimeoutError(timeoutMs, option));
      onExpired();
    }, timeoutMs);
    work.then(
      (value) => {
        if (expired) onLate?.(value);
        else {
          clearTimeout(timer);
          resolve(value);
        }
      },
      (error: unknown) => {
        if (expired) return;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
