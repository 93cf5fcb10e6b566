/**
 * `createDashboard`: the dashboard as a fetch-style handler (`Request` → `Response`), and the
 * same adapted to node's `(req, res, next)` for `node:http`, Express, Connect and Fastify.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { consoleLogger, JobAdmin, type JobStore, type Logger } from '@jobs/core';
import type { ApiResult } from './api.js';
import { ASSETS } from './assets.js';
import type { PageRequest, Settings } from './context.js';
import { type AllowedHosts, describeHosts, hostAllowed, hostRule, parseHost } from './hosts.js';
import type { SafeHtml } from './html.js';
import { messagePage } from './layout.js';
import { pathProblem, queryProblem } from './params.js';
import { DEFAULT_COUNT_LIMIT, SlowReadCache } from './reads.js';
import { findRoute } from './routes.js';
import {
  CSRF_COOKIE,
  CSRF_FIELD,
  csrfCookieHeader,
  csrfToken,
  newCsrfCookie,
  readCookie,
  sameOrigin,
  validCsrf,
} from './security.js';

/** The request object a dashboard is called with: node's, or a fetch `Request`. */
export type DashboardRequest = IncomingMessage | Request;

export interface DashboardOptions {
  /** Any `JobStore` (its optional methods light up more of the dashboard). */
  store: JobStore;
  /**
   * Says whether this request may run actions (retry, delete, cancel, suspend, bulk, pause).
   * Without it the dashboard is read-only. Reads are never checked: guard the mount point with
   * your app's own authentication.
   */
  authorize?: (request: DashboardRequest) => boolean | Promise<boolean>;
  /** True: read-only even when `authorize` is given. */
  readOnly?: boolean;
  /**
   * Path the dashboard is served under, e.g. `/jobs`. Default: Express's `req.baseUrl` when
   * mounted with `app.use('/jobs', …)`, else the root.
   */
  basePath?: string;
  /** Secret of the CSRF tokens. Default: random per dashboard (tokens die with the process). */
  secret?: string | Buffer;
  /** Origins, besides the request's own, that may post forms (a proxy's public origin). */
  trustedOrigins?: readonly string[];
  /**
   * Host names the dashboard answers besides `localhost`, `*.localhost` and IP addresses (any
   * port), which it always answers. A request for any other `Host` gets 421 before anything is
   * read: a page on another site that points its own name at this server (DNS rebinding) reads
   * nothing. Serving it under a real name (`https://ops.example.com/jobs`)? List that name;
   * `.example.com` allows the domain and every name under it. `'any'` turns the check off, for
   * an app that checks `Host` itself (or a proxy that does).
   *
   * @example
   * createDashboard({ store, authorize, allowedHosts: ['ops.example.com'] })
   */
  allowedHosts?: AllowedHosts;
  /** Where the dashboard's own errors go. Default: the console, warnings and errors. */
  logger?: Logger;
  /** Shown in the top bar and titles. Default `Jobs`. */
  title?: string;
  /**
   * The overview counts live jobs exactly up to this many. Beyond, it counts the newest this
   * many (a bounded read, whatever the table's size) and shows the total as the database's
   * estimate (`≈`), or as `N+` where the database keeps none (SQLite). Default 20,000.
   */
  countLimit?: number;
}

export interface Dashboard {
  /** For `node:http`, Express, Connect, Fastify (`server.on('request', d.handler)`). */
  handler(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void;
  /** For fetch-style servers (Hono, Bun, Deno): `app.all('/jobs/*', (c) => d.fetch(c.req.raw))`. */
  fetch(request: Request): Promise<Response>;
}

/** Largest form body read (a bulk form is a few hundred bytes; an error message can be long). */
const MAX_BODY = 256 * 1024;

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
};

function normalizeBase(base: string): string {
  const trimmed = base.trim().replace(/\/+$/, '');
  return trimmed === '' ? '' : trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

function htmlResponse(
  status: number,
  body: SafeHtml | string,
  headers: Record<string, string> = {},
): Response {
  return new Response(String(body), {
    status,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
      ...headers,
    },
  });
}

function jsonResponse(result: ApiResult, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(result.body), {
    status: result.status,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
      ...headers,
    },
  });
}

/** A short plain-text answer (refusals that come before any page can be rendered). */
function textResponse(status: number, text: string): Response {
  return new Response(text, {
    status,
    headers: {
      'content-type': 'text/plain; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  });
}

/**
 * Creates a dashboard over `store`.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { createDashboard } from '@jobs/dashboard';
 * const dashboard = createDashboard({ store, authorize: (req) => isAdmin(req) });
 * createServer(dashboard.handler).listen(8080);
 * // Express: app.use('/jobs', requireLogin, dashboard.handler)
 */
export function createDashboard(options: DashboardOptions): Dashboard {
  if (!options || typeof options.store !== 'object' || options.store === null) {
    throw new TypeError('[@jobs/dashboard] createDashboard: `store` (a JobStore) is required');
  }
  const countLimit = options.countLimit ?? DEFAULT_COUNT_LIMIT;
  if (!Number.isSafeInteger(countLimit) || countLimit < 1) {
    throw new TypeError(
      `[@jobs/dashboard] createDashboard: \`countLimit\` must be a whole number of at least 1 (got ${String(options.countLimit)})`,
    );
  }
  const hosts = hostRule(options.allowedHosts);
  const settings: Settings = {
    store: options.store,
    // The admin API without an engine: actions get its checks, defaults and bulk batching.
    admin: new JobAdmin(options.store),
    logger: options.logger ?? consoleLogger('warn'),
    actionsEnabled: options.readOnly !== true && typeof options.authorize === 'function',
    authorize: (options.authorize as Settings['authorize']) ?? null,
    secret:
      options.secret === undefined
        ? randomBytes(32)
        : Buffer.isBuffer(options.secret)
          ? options.secret
          : Buffer.from(options.secret),
    trustedOrigins: options.trustedOrigins ?? [],
    title: options.title ?? 'Jobs',
    groupedCounts: new SlowReadCache(),
    countLimit,
  };
  const configuredBase =
    options.basePath === undefined ? undefined : normalizeBase(options.basePath);

  /** Host names refused so far, each logged once (a bounded set: a scan cannot grow it). */
  const refusedHosts = new Set<string>();

  /**
   * The answer to a request for a `Host` this dashboard does not serve (421), a malformed one
   * (400), or null when it may go on. Checked first, before any store read.
   */
  function refuseHost(header: string): Response | null {
    const host = parseHost(header);
    if (host === null) {
      return textResponse(
        400,
        '[@jobs/dashboard] Bad request: the Host header is missing or malformed.',
      );
    }
    if (hostAllowed(hosts, host)) return null;
    if (!refusedHosts.has(host.name) && refusedHosts.size < 20) {
      refusedHosts.add(host.name);
      const add = `createDashboard({ allowedHosts: ['${host.name}'] }) (CLI: --allowed-host ${host.name})`;
      settings.logger.warn(
        `[@jobs/dashboard] refused a request for host "${host.name}": it answers ${describeHosts(hosts)}. Serving it under that name? Add it: ${add}`,
      );
    }
    return textResponse(
      421,
      `[@jobs/dashboard] This dashboard does not answer for the host "${host.name}".

It answers only ${describeHosts(hosts)}, so that a page on another site cannot point its own name at this server and read the dashboard through it (DNS rebinding).

Opening it under this name on purpose? Allow the name where the dashboard is created:
  createDashboard({ store, allowedHosts: ['${host.name}'] })
or, with the CLI:
  jobs dashboard --allowed-host ${host.name}
`,
    );
  }

  /** 400 for a malformed path or query parameter: JSON under /api/, else a page. */
  function badRequest(path: string, base: string, problem: string): Response {
    const message = `Bad request: ${problem}.`;
    if (path.startsWith('/api/')) return jsonResponse({ status: 400, body: { error: message } });
    return htmlResponse(400, messagePage(null, 'Bad request', message, `${base}/`));
  }

  async function respond(
    request: Request,
    base: string,
    original: DashboardRequest,
  ): Promise<Response> {
    const url = new URL(request.url);
    const path = url.pathname.slice(base.length) || '/';
    const method = request.method.toUpperCase();

    if (path.startsWith('/assets/') && (method === 'GET' || method === 'HEAD')) {
      const asset = ASSETS.get(path.slice('/assets/'.length));
      if (!asset) return textResponse(404, 'Not found: no such asset.');
      return new Response(asset.body, {
        headers: {
          'content-type': asset.type,
          'cache-control': 'public, max-age=31536000, immutable',
          'x-content-type-options': 'nosniff',
        },
      });
    }

    // Malformed input is answered before anything is read from the store.
    const problem = pathProblem(path) ?? queryProblem(url.search.slice(1));
    if (problem !== null) return badRequest(path, base, problem);

    const cookie = readCookie(request.headers.get('cookie'), CSRF_COOKIE);
    const csrfCookie = cookie && /^[\w-]{16,64}$/.test(cookie) ? cookie : newCsrfCookie();
    const setCookie: Record<string, string> =
      csrfCookie === cookie
        ? {}
        : { 'set-cookie': csrfCookieHeader(csrfCookie, base || '/', url.protocol === 'https:') };
    let ctx: PageRequest | null = null;
    try {
      const canAct =
        settings.actionsEnabled &&
        settings.authorize !== null &&
        (await settings.authorize(original as never)) === true;
      ctx = {
        settings,
        admin: settings.admin,
        method,
        path,
        query: url.searchParams,
        base,
        headers: request.headers,
        origin: url.origin,
        now: (await settings.store.now()).getTime(),
        csrf: csrfToken(settings.secret, csrfCookie),
        canAct,
      };
      if (method === 'POST') return await post(ctx, request, cookie);
      if (method !== 'GET' && method !== 'HEAD') {
        return htmlResponse(
          405,
          messagePage(
            ctx,
            'Method not allowed',
            'Pages are read with GET; actions are forms sent with POST.',
          ),
          { allow: 'GET, HEAD, POST', ...setCookie },
        );
      }
      const found = findRoute('GET', path);
      if (found && 'api' in found.route) {
        return jsonResponse(await found.route.api(ctx, found.params), setCookie);
      }
      if (path.startsWith('/api/')) {
        return jsonResponse({ status: 404, body: { error: 'not found' } }, setCookie);
      }
      const body =
        found && 'page' in found.route ? await found.route.page(ctx, found.params) : null;
      return body === null
        ? htmlResponse(
            404,
            messagePage(ctx, 'Not found', 'There is nothing at this address.'),
            setCookie,
          )
        : htmlResponse(200, body, setCookie);
    } catch (error) {
      const incident = randomBytes(4).toString('hex');
      settings.logger.error('[@jobs/dashboard] request failed', { incident, method, path, error });
      return htmlResponse(
        500,
        messagePage(
          null,
          'Something went wrong',
          `The dashboard could not answer this request (incident ${incident}, logged on the server).`,
          `${base}/`,
        ),
        setCookie,
      );
    }
  }

  async function post(
    ctx: PageRequest,
    request: Request,
    cookie: string | null,
  ): Promise<Response> {
    const refuse = (status: number, title: string, message: string): Response =>
      htmlResponse(status, messagePage(ctx, title, message));
    if (!settings.actionsEnabled) {
      return refuse(
        403,
        'Read-only',
        'This dashboard is read-only: actions need createDashboard({ authorize }) (CLI: --allow-actions).',
      );
    }
    if (!ctx.canAct)
      return refuse(403, 'Not allowed', 'You are not authorized to run actions on this dashboard.');
    if (!sameOrigin(request.headers, ctx.origin, settings.trustedOrigins)) {
      return refuse(403, 'Refused', 'The form was sent from another site.');
    }
    const text = await request.text();
    if (text.length > MAX_BODY) return refuse(413, 'Too large', 'The form is too large.');
    const form = new URLSearchParams(text);
    if (!validCsrf(settings.secret, cookie, form.get(CSRF_FIELD))) {
      return refuse(
        403,
        'Refused',
        'The form’s security token is missing or stale: reload the page and try again.',
      );
    }
    const problem = queryProblem(text);
    if (problem !== null)
      return refuse(
        400,
        'Bad request',
        `Bad form: ${problem.replace('query parameter', 'field')}.`,
      );
    const found = findRoute('POST', ctx.path);
    const result =
      found && 'action' in found.route ? await found.route.action(ctx, found.params, form) : null;
    if (result === null)
      return refuse(
        404,
        'Not found',
        'There is no such action, or its job or schedule no longer exists.',
      );
    if ('refuse' in result)
      return refuse(result.refuse.status, result.refuse.title, result.refuse.message);
    if ('redirect' in result) {
      return new Response(null, {
        status: 303,
        headers: { location: result.redirect, 'cache-control': 'no-store' },
      });
    }
    return htmlResponse(200, result.page);
  }

  return {
    fetch(request: Request): Promise<Response> {
      const base = configuredBase ?? '';
      const { pathname, host } = new URL(request.url);
      const misdirected = refuseHost(host);
      if (misdirected) return Promise.resolve(misdirected);
      if (base !== '' && pathname !== base && !pathname.startsWith(`${base}/`)) {
        return Promise.resolve(
          htmlResponse(
            404,
            messagePage(null, 'Not found', 'There is nothing at this address.', `${base}/`),
          ),
        );
      }
      return respond(request, base, request);
    },

    handler(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void {
      const mounted = (req as { baseUrl?: unknown }).baseUrl;
      const raw = req.url ?? '/';
      let base: string;
      let rest: string;
      if (typeof mounted === 'string') {
        // Express/Connect stripped the mount path from req.url.
        base = configuredBase ?? normalizeBase(mounted);
        rest = raw;
      } else {
        base = configuredBase ?? '';
        const under =
          base === '' || raw === base || raw.startsWith(`${base}/`) || raw.startsWith(`${base}?`);
        if (!under) {
          if (next) next();
          else {
            res.statusCode = 404;
            res.end('Not found');
          }
          return;
        }
        rest = raw.slice(base.length);
      }
      if (!rest.startsWith('/')) rest = `/${rest}`;
      const host = req.headers.host ?? req.headers[':authority'];
      const misdirected = refuseHost(typeof host === 'string' ? host : '');
      if (misdirected) {
        // Its body stays unread (node discards it): nothing of this request is used.
        writeResponse(misdirected, res).catch((error: unknown) =>
          settings.logger.error('[@jobs/dashboard] request failed', { error }),
        );
        return;
      }
      toRequest(req, host as string, `${base}${rest}`)
        .then((request) => respond(request, base, req))
        .then((response) => writeResponse(response, res))
        .catch((error: unknown) => {
          settings.logger.error('[@jobs/dashboard] request failed', { error });
          if (!res.headersSent) {
            res.statusCode = 500;
            res.setHeader('content-type', 'text/plain; charset=utf-8');
          }
          res.end('The dashboard could not answer this request.');
        });
    },
  };
}

/** A fetch `Request` of a node request (its body read, or taken from a body parser). */
async function toRequest(req: IncomingMessage, host: string, path: string): Promise<Request> {
  const encrypted = (req.socket as { encrypted?: boolean } | undefined)?.encrypted === true;
  // Express's req.protocol honours its `trust proxy` setting.
  const given = (req as unknown as { protocol?: unknown }).protocol;
  const protocol = typeof given === 'string' ? given : encrypted ? 'https' : 'http';
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(':')) continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const method = (req.method ?? 'GET').toUpperCase();
  let body: string | undefined;
  if (method !== 'GET' && method !== 'HEAD') body = await readBody(req);
  return new Request(`${protocol}://${host}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parsed = (req as { body?: unknown }).body;
  if (typeof parsed === 'string') return parsed;
  if (Buffer.isBuffer(parsed)) return parsed.toString('utf8');
  if (parsed && typeof parsed === 'object') {
    // A body parser (express.urlencoded) already read it.
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(parsed as Record<string, unknown>))
      params.set(key, String(value));
    return params.toString();
  }
  if (req.readableEnded) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY + 1) break;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function writeResponse(response: Response, res: ServerResponse): Promise<void> {
  res.statusCode = response.status;
  response.headers.forEach((value, name) => {
    res.setHeader(name, value);
  });
  const body = Buffer.from(await response.arrayBuffer());
  res.end(body);
}
