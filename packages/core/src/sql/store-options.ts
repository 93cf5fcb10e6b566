/**
 * The option checks every SQL store's constructor starts with, and the deadline options the
 * network stores (`@jobs/postgres`, `@jobs/mysql`, `@jobs/typeorm`) share, documented once.
 */
import { ValidationError } from '../errors.js';
import { assertKnownOptions } from '../store-support.js';
import type { ConnectionTimeouts } from './deadline.js';

/** Deadline options of a store whose database is behind a network (see `ConnectionTimeouts`). */
export interface NetworkTimeoutOptions {
  /**
   * Opening a connection, or waiting for a free one in the pool, fails after this. Default
   * 10 000. On your own pool set the driver's connect timeout too: the store gives up
   * waiting, your pool decides when to give up connecting.
   */
  connectTimeoutMs?: number;
  /**
   * Deadline of each statement, kept by the client (a silent network never answers the
   * server's): past it the call fails and its connection is destroyed, so the server rolls
   * its transaction back and frees its locks once it notices. Where the store opens the
   * connections it is also the server's own bound (PostgreSQL's `statement_timeout` and
   * `idle_in_transaction_session_timeout`). `migrate()` is not bounded. Default 30 000.
   */
  queryTimeoutMs?: number;
  /** Idle time before TCP keepalive probes on the store's own connections. Default 10 000. */
  keepAliveDelayMs?: number;
}

/** The names of `NetworkTimeoutOptions`, for a store's list of known options. */
export const NETWORK_TIMEOUT_OPTIONS: readonly (keyof ConnectionTimeouts)[] = [
  'connectTimeoutMs',
  'queryTimeoutMs',
  'keepAliveDelayMs',
];

/**
 * Checks a store's options: an object, with only `known` keys, and exactly one of the two
 * `oneOf` (where the connection comes from). `source` names the package in messages.
 *
 * @example
 * checkStoreOptions(options, '@jobs/mysql', KNOWN, ['uri', 'pool']);
 */
export function checkStoreOptions(
  options: unknown,
  source: string,
  known: Iterable<string>,
  oneOf?: readonly [string, string],
): void {
  const choice = oneOf ? `\`${oneOf[0]}\` or \`${oneOf[1]}\`` : 'options';
  if (options === null || typeof options !== 'object') {
    throw new ValidationError('options', `[${source}] must be an object with ${choice}`);
  }
  assertKnownOptions(options, known, source);
  const given = (key: string): boolean => (options as Record<string, unknown>)[key] !== undefined;
  if (oneOf && given(oneOf[0]) === given(oneOf[1])) {
    throw new ValidationError(oneOf[0], `[${source}] give exactly one of ${choice}`);
  }
}
