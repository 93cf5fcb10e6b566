/** What a page or action sees of one request, and the dashboard's settings. */
import type { JobAdmin, JobStore, Logger, QueueStatsRow } from '@jobs/core';
import { html, type SafeHtml } from './html.js';
import type { SlowReadCache } from './reads.js';
import { CSRF_FIELD } from './security.js';

/** The request object the dashboard was called with: node's `IncomingMessage` or a fetch `Request`. */
export type OriginalRequest = unknown;

export interface Settings {
  /** Read only for its name and its clock; everything else goes through `admin`. */
  store: JobStore;
  /** The admin API over `store`: every read and action goes through it. */
  admin: JobAdmin;
  logger: Logger;
  /** Actions may run at all (not read-only, and `authorize` given). */
  actionsEnabled: boolean;
  authorize: ((request: never) => boolean | Promise<boolean>) | null;
  secret: Buffer;
  trustedOrigins: readonly string[];
  title: string;
  /** The overview's grouped counts (see `SlowReadCache`). */
  groupedCounts: SlowReadCache<GroupedCounts>;
  /** Live jobs the overview counts exactly; beyond, it counts the newest this many. */
  countLimit: number;
}

/** Live jobs grouped by queue (null without `queueStats`), type and state. */
export interface GroupedCounts {
  perQueue: boolean;
  rows: QueueStatsRow[];
  /**
   * Null: every live job was counted. Otherwise the table held more than `newest` jobs, and
   * `rows` count only the newest `newest` of them; `estimate` is the database's estimate of
   * the whole table (null where it keeps none).
   */
  bounded: { newest: number; estimate: number | null } | null;
}

/**
 * One request as a page or action sees it (what it reads and writes goes through `admin`), with
 * the dashboard's settings.
 */
export interface PageRequest {
  settings: Settings;
  /** Every read and change: the admin API over the store (its checks, defaults and batching). */
  admin: JobAdmin;
  method: string;
  /** Path under the dashboard's base, starting with `/`. */
  path: string;
  query: URLSearchParams;
  /** The dashboard's base path (no trailing slash; `''` at the root). */
  base: string;
  headers: Headers;
  /** `scheme://host` of this request. */
  origin: string;
  /** The store's clock, read once per request (ms). */
  now: number;
  /** The CSRF token for forms on this page. */
  csrf: string;
  /** Actions are enabled for this request (settings allow them and `authorize` said yes). */
  canAct: boolean;
}

/** The `:name` segments of the route a request matched, decoded (`routes.ts`). */
export type RouteParams = Readonly<Record<string, string>>;

/** A link under the dashboard's base, with query parameters (empty ones left out). */
export function href(
  ctx: Pick<PageRequest, 'base'>,
  path: string,
  query: Record<string, string | number | null | undefined> = {},
): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  }
  const search = params.toString();
  return `${ctx.base}${path}${search ? `?${search}` : ''}`;
}

/**
 * A POST form: the CSRF token, hidden fields, one button. `confirm` asks before sending.
 * Rendered only when actions are enabled for this request.
 */
export function actionForm(
  ctx: PageRequest,
  path: string,
  label: string,
  options: { fields?: Record<string, string>; confirm?: string; kind?: 'danger' | 'primary' } = {},
): SafeHtml {
  if (!ctx.canAct) return html``;
  const fields = Object.entries(options.fields ?? {});
  return html`<form method="post" action="${href(ctx, path)}"${options.confirm ? html` data-confirm="${options.confirm}"` : ''}>
<input type="hidden" name="${CSRF_FIELD}" value="${ctx.csrf}">${fields.map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`,
  )}<button type="submit" class="${options.kind ?? ''}">${label}</button></form>`;
}

/** A path segment, decoded; a malformed one stays as it is (and then names nothing). */
export function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
