/**
 * Bearer-token clients: who may call the API and which job types each may touch. Tokens are
 * compared as SHA-256 digests with `timingSafeEqual`, against every client each time, so the
 * answer's timing tells nothing about how much of a token was right or which client matched.
 * Tokens are never logged or echoed; a client is named in logs and metrics by its `name`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** One client of the worker API: its bearer token and the job types it may acquire and settle. */
export interface WorkerClientConfig {
  /** The bearer token (`Authorization: Bearer <token>`): at least 16 characters. */
  token: string;
  /** Job types this client may acquire, extend, complete, fail and release. Never empty. */
  types: readonly string[];
  /** Name in lock owners, logs and metrics (never the token). Default `client-<n>`. */
  name?: string;
  /** Most jobs one acquire call may lease to this client. Default 100. */
  maxAcquire?: number;
}

export interface AuthorizedClient {
  name: string;
  types: ReadonlySet<string>;
  maxAcquire: number;
}

interface Entry {
  digest: Buffer;
  client: AuthorizedClient;
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

const NAME = /^[A-Za-z0-9._@-]{1,64}$/;

export const DEFAULT_MAX_ACQUIRE = 100;
/** The largest batch an acquire call may ask for, whatever a client is allowed. */
export const MAX_ACQUIRE = 1_000;

/** Checks the configured clients (clear errors on bad ones) and builds the token check. */
export function createAuthenticator(
  clients: readonly WorkerClientConfig[],
): (header: string | null) => AuthorizedClient | null {
  const where = '[@jobs/http] createWorkerApi: clients';
  if (!Array.isArray(clients) || clients.length === 0) {
    throw new TypeError(`${where} must list at least one { token, types }`);
  }
  const entries: Entry[] = [];
  const names = new Set<string>();
  const digests = new Set<string>();
  clients.forEach((config, index) => {
    const at = `${where}[${index}]`;
    if (config === null || typeof config !== 'object')
      throw new TypeError(`${at} is not an object`);
    if (typeof config.token !== 'string' || config.token.length < 16) {
      throw new TypeError(`${at}.token must be a string of at least 16 characters`);
    }
    if (!/^[\x21-\x7e]+$/.test(config.token)) {
      throw new TypeError(`${at}.token may hold only visible ASCII characters (no spaces)`);
    }
    if (!Array.isArray(config.types) || config.types.length === 0) {
      throw new TypeError(`${at}.types must list at least one job type`);
    }
    for (const type of config.types) {
      if (typeof type !== 'string' || type.length === 0 || type.length > 255) {
        throw new TypeError(`${at}.types holds ${JSON.stringify(type)}: not a job type name`);
      }
    }
    const name = config.name ?? `client-${index + 1}`;
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new TypeError(`${at}.name must be 1–64 characters of A-Z a-z 0-9 . _ @ -`);
    }
    if (names.has(name)) throw new TypeError(`${at}.name "${name}" is given twice`);
    names.add(name);
    const maxAcquire = config.maxAcquire ?? DEFAULT_MAX_ACQUIRE;
    if (!Number.isSafeInteger(maxAcquire) || maxAcquire < 1 || maxAcquire > MAX_ACQUIRE) {
      throw new TypeError(`${at}.maxAcquire must be a whole number from 1 to ${MAX_ACQUIRE}`);
    }
    const hashed = digest(config.token);
    if (digests.has(hashed.toString('hex'))) {
      throw new TypeError(`${at}.token is the token of another client: give each its own`);
    }
    digests.add(hashed.toString('hex'));
    entries.push({ digest: hashed, client: { name, types: new Set(config.types), maxAcquire } });
  });

  return (header) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    if (!match) return null;
    const given = digest(match[1] as string);
    let found: AuthorizedClient | null = null;
    // Every entry is compared, so the time taken does not depend on which one matched.
    for (const entry of entries) {
      if (timingSafeEqual(given, entry.digest)) found = entry.client;
    }
    return found;
  };
}
