/**
 * The option checks every SQL store's constructor starts with, and the deadline options the
 * network stores (`@jobs/postgres`, `@jobs/mysql`, `@jobs/typeorm`) share, documented once.
 */
import { ValidationError } from '../errors.js';
import { assertKnownOptions, assertPositiveInteger } from '../rules.js';

import type { ConnectionTimeouts } from './executor.js';

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

/** What `checkStoreOptions` checks besides the known keys. */
export interface StoreOptionRules {
  /** Exactly one of the two must be given (where the connection comes from). */
  oneOf?: readonly [string, string];
  /** Options that, when given, must be positive integers (sizes, intervals, waits). */
  positiveIntegers?: readonly string[];
}

/**
 * Checks a store's options: an object, with only `known` keys, exactly one of the two `oneOf`
 * and positive integers where `positiveIntegers` says. `label` names the package in messages.
 *
 * @example
 * checkStoreOptions(options, '@jobs/mysql', KNOWN, { oneOf: ['uri', 'pool'] });
 */
export function checkStoreOptions(
  options: unknown,
  label: string,
  known: Iterable<string>,
  rules: StoreOptionRules | StoreOptionRules['oneOf'] = {},
): void {
  // `oneOf` alone, as a pair, is the 0.2 signature: still accepted.
  const { oneOf, positiveIntegers = [] }: StoreOptionRules =
    rules === undefined || 'length' in rules ? { oneOf: rules } : rules;
  const choice = oneOf ? `\`${oneOf[0]}\` or \`${oneOf[1]}\`` : 'options';
  if (options === null || typeof options !== 'object') {
    throw new ValidationError('options', `[${label}] must be an object with ${choice}`);
  }
  assertKnownOptions(options, known, label);
  const values = options as Record<string, unknown>;
  const given = (key: string): boolean => values[key] !== undefined;
  if (oneOf && given(oneOf[0]) === given(oneOf[1])) {
    throw new ValidationError(oneOf[0], `[${label}] give exactly one of ${choice}`);
  }
  for (const key of positiveIntegers) {
    // assertPositiveInteger rejects anything but a positive safe integer, of any type.
    if (given(key)) assertPositiveInteger(values[key] as number, key, label);
  }
}
