/**
 * Which `Host` a dashboard answers: the defence against DNS rebinding.
 *
 * A page on `evil.example` can re-point its own name at 127.0.0.1 (or any address its victim's
 * browser reaches); the browser then treats the dashboard as part of that page's site and lets
 * it read every answer — payloads, errors, CSRF tokens. What the browser cannot fake is the
 * `Host` header: it names the site the page was loaded from (`evil.example`). So the dashboard
 * answers only hosts it was told about.
 *
 * Always allowed: `localhost` and names under `.localhost` (they resolve to loopback, RFC 6761)
 * and IP addresses — a rebinding page has a name of its own by definition, so a `Host` that is
 * an IP address was typed by the user. Everything else must be listed in `allowedHosts`.
 */
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { ValidationError } from '@jobs/core';

/** `createDashboard({ allowedHosts })`: names besides the built-in ones, or `'any'`. */
export type AllowedHosts = readonly string[] | 'any';

/** The checked form of `allowedHosts`. */
export interface HostRule {
  any: boolean;
  /** Exact names, lower case, ASCII (punycode), no trailing dot. */
  names: ReadonlySet<string>;
  /** `.example.com` entries: the domain and every name under it. */
  domains: readonly string[];
}

/** A `Host` header, parsed: its name (lower case, no port, no brackets) and whether it is an IP. */
export interface RequestHost {
  name: string;
  ip: boolean;
}

/** What the built-in names are, in the words the refusal and the README use. */
export const BUILT_IN_HOSTS = 'localhost, *.localhost and IP addresses';

/** A DNS name in ASCII: labels of letters, digits, `-` and `_`, dot-separated. */
const NAME = /^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/;
/** `host[:port]` as a browser sends it: a name, an IPv4 address or a bracketed IPv6 one. */
const HOST_HEADER = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9_.-]+))(?::(\d{0,5}))?$/;

function stripDot(name: string): string {
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** Parses a `Host` header; null when it is not one a client could mean (the caller says 400). */
export function parseHost(header: string): RequestHost | null {
  if (header.length > 260) return null;
  const match = HOST_HEADER.exec(header);
  if (!match) return null;
  const [, bracketed, plain, port] = match;
  if (port !== undefined && port !== '' && Number(port) > 65_535) return null;
  if (bracketed !== undefined) {
    return isIP(bracketed) === 6 ? { name: bracketed.toLowerCase(), ip: true } : null;
  }
  const name = stripDot((plain as string).toLowerCase());
  if (isIP(name) === 4) return { name, ip: true };
  return name.length <= 253 && NAME.test(name) ? { name, ip: false } : null;
}

/** True when the dashboard answers requests for `host`. */
export function hostAllowed(rule: HostRule, host: RequestHost): boolean {
  if (rule.any || host.ip) return true;
  const { name } = host;
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (rule.names.has(name)) return true;
  return rule.domains.some((domain) => name === domain.slice(1) || name.endsWith(domain));
}

/** Checks `allowedHosts` (an error names the entry and says what to write instead). */
export function hostRule(option: unknown): HostRule {
  if (option === undefined) return { any: false, names: new Set(), domains: [] };
  if (option === 'any') return { any: true, names: new Set(), domains: [] };
  if (!Array.isArray(option)) {
    throw new ValidationError(
      'allowedHosts',
      `[@jobs/dashboard] createDashboard: must be an array of host names (e.g. ['ops.example.com']) or 'any', got ${typeof option === 'string' ? JSON.stringify(option) : String(option)}`,
    );
  }
  const names = new Set<string>();
  const domains: string[] = [];
  for (const [i, entry] of (option as unknown[]).entries()) {
    const checked = hostEntry(entry, `allowedHosts[${i}]`);
    if (checked.startsWith('.')) domains.push(checked);
    else if (checked !== '') names.add(checked);
  }
  return { any: false, names, domains };
}

/**
 * One `allowedHosts` entry: a name (lower case, ASCII), a `.domain`, or '' for an IP address
 * (always allowed anyway). Throws a `ValidationError` saying what to write instead.
 */
function hostEntry(entry: unknown, field: string): string {
  const fail = (why: string): never => {
    throw new ValidationError(field, `[@jobs/dashboard] createDashboard: ${why}`);
  };
  if (typeof entry !== 'string') return fail(`must be a host name, got ${String(entry)}`);
  const text = entry.trim().toLowerCase();
  if (text === '') return fail('must be a host name, got an empty string');
  if (text.includes('://')) {
    let example = 'ops.example.com';
    try {
      example = new URL(text).hostname || example;
    } catch {
      // Not even a URL: the generic example stands.
    }
    return fail(`"${entry}" is a URL: give the host name alone, e.g. "${example}"`);
  }
  if (text === '*' || text === 'any') {
    return fail(`"${entry}": to answer every host, pass allowedHosts: 'any' (not in a list)`);
  }
  if (text.startsWith('*.')) {
    return fail(`"${entry}": write a domain with its subdomains as "${text.slice(1)}"`);
  }
  if (text.startsWith('[') && text.endsWith(']') && isIP(text.slice(1, -1)) === 6) return '';
  if (isIP(text) !== 0) return '';
  if (/^(?:[^:]+|\[[^\]]*\]):\d*$/.test(text)) {
    return fail(`"${entry}": give the name without the port (any port is allowed)`);
  }
  const domain = text.startsWith('.');
  const bare = domain ? text.slice(1) : text;
  // Only non-ASCII names go through `domainToASCII` (to punycode): it parses what it is given
  // as a URL's host, so it would read `ops.example.com/jobs` as `ops.example.com`.
  const ascii = stripDot(
    /^[\x21-\x7e]*$/.test(bare) || /[\s/\\?#@%:]/.test(bare) ? bare : domainToASCII(bare),
  );
  if (ascii === '' || ascii.length > 253 || !NAME.test(ascii)) {
    return fail(`"${entry}" is not a host name (letters, digits, "-" and dots)`);
  }
  return domain ? `.${ascii}` : ascii;
}

/** `localhost, *.localhost and IP addresses, plus ops.example.com`, for messages. */
export function describeHosts(rule: HostRule): string {
  if (rule.any) return 'any host';
  const listed = [...rule.names, ...rule.domains];
  return listed.length === 0 ? BUILT_IN_HOSTS : `${BUILT_IN_HOSTS}, plus ${listed.join(', ')}`;
}
