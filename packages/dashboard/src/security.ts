/**
 * Who may act, and proof that a form was sent by the dashboard's own page.
 *
 * CSRF: a double-submit cookie bound to the dashboard's secret. The first page view sets a
 * random, HttpOnly, SameSite=Strict cookie; every form carries `HMAC-SHA256(secret, cookie)`.
 * A POST passes only with both, matching — another site can neither read the cookie nor compute
 * the token without the secret. The request's `Origin` (or `Sec-Fetch-Site`) must also be this
 * dashboard's own origin when the browser sends one.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const CSRF_COOKIE = 'jobs_dashboard_csrf';
export const CSRF_FIELD = '_csrf';

/** Reads one cookie from a Cookie header. */
export function readCookie(header: string | null, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

export function newCsrfCookie(): string {
  return randomBytes(18).toString('base64url');
}

export function csrfToken(secret: Buffer, cookie: string): string {
  return createHmac('sha256', secret).update(cookie).digest('base64url');
}

/** True when `token` is the token of `cookie` (constant time). */
export function validCsrf(secret: Buffer, cookie: string | null, token: string | null): boolean {
  if (!cookie || !token || !/^[\w-]{16,64}$/.test(cookie)) return false;
  const expected = Buffer.from(csrfToken(secret, cookie));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** `Set-Cookie` of a fresh CSRF cookie, scoped to the dashboard's path. */
export function csrfCookieHeader(value: string, path: string, secure: boolean): string {
  return `${CSRF_COOKIE}=${value}; Path=${path || '/'}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/**
 * False when the browser says the request came from another site: an `Origin` that is not
 * ours (nor in `trusted`), or `Sec-Fetch-Site: cross-site`. Clients that send neither (curl)
 * still need the CSRF cookie and token.
 */
export function sameOrigin(headers: Headers, ours: string, trusted: readonly string[]): boolean {
  const origin = headers.get('origin');
  if (origin !== null) return origin === ours || trusted.includes(origin);
  const site = headers.get('sec-fetch-site');
  return site === null || site === 'same-origin' || site === 'none';
}
