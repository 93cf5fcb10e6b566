/** The page shell: head, top bar with the tabs, notices, and the body a page renders. */
import { CSS_FILE, JS_FILE } from './assets.js';
import { href, type PageRequest } from './context.js';
import { utc } from './format.js';
import { html, SafeHtml } from './html.js';

const TABS: [string, string][] = [
  ['/', 'Overview'],
  ['/jobs', 'Jobs'],
  ['/deadletter', 'Dead letter'],
  ['/flows', 'Flows'],
  ['/schedules', 'Schedules'],
  ['/history', 'History'],
];

/**
 * Messages after an action's redirect, by code (never text from the query string): `n` is how
 * many jobs it touched, `running` how many of them were running and only got a cancel request.
 */
const DONE = new Map<string, (n: string, running: string) => string>([
  ['retried', (n) => `Retried ${n} job(s): they are due now.`],
  [
    'deleted',
    (n, running) =>
      running === '0'
        ? `Deleted ${n} job(s).`
        : `Deleted ${n} job(s). ${running} of them were running: cancel requested — each is removed when its worker stops it.`,
  ],
  [
    'delete-requested',
    () => 'Cancel requested — the job is running; it is removed when its worker stops it.',
  ],
  ['cancelled', () => 'Cancelled: the job was removed and will not run.'],
  [
    'cancel-requested',
    () => 'Cancellation requested: the worker running it is told at its next lease renewal.',
  ],
  ['suspended', (n) => `Suspended ${n} waiting job(s).`],
  ['activated', (n) => `Activated ${n} job(s).`],
  ['paused', () => 'Schedule paused.'],
  ['resumed', () => 'Schedule resumed.'],
]);

/** True when `code` is a notice `?done=` may name (own entries only: `__proto__` is none). */
export function isDoneCode(code: string): boolean {
  return DONE.has(code);
}

const READ_ONLY_TITLE = 'Actions need createDashboard({ authorize }) (CLI: --allow-actions)';
const READ_ONLY_BADGE = html`<span class="badge neutral" title="${READ_ONLY_TITLE}">read-only</span>`;

export function page(ctx: PageRequest, title: string, body: SafeHtml): SafeHtml {
  const section = ctx.path === '/' ? '/' : `/${ctx.path.split('/')[1] ?? ''}`;
  const done = DONE.get(ctx.query.get('done') ?? '');
  const count = (name: string, fallback: string): string =>
    (ctx.query.get(name) ?? '').replace(/\D/g, '') || fallback;
  const notice = done ? done(count('n', '1'), count('running', '0')) : null;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · ${ctx.settings.title}</title>
<link rel="stylesheet" href="${href(ctx, `/assets/${CSS_FILE}`)}">
<script src="${href(ctx, `/assets/${JS_FILE}`)}" defer></script></head>
<body><header class="top"><a class="brand" href="${href(ctx, '/')}"><span class="logo"></span>${ctx.settings.title}</a>
<nav class="tabs">${TABS.map(
    ([path, label]) =>
      html`<a href="${href(ctx, path)}"${path === section ? html` class="active"` : ''}>${label}</a>`,
  )}</nav>
<div class="meta"><span class="mono">${ctx.settings.store.name}</span>
${ctx.canAct ? html`<span class="badge ok">actions on</span>` : READ_ONLY_BADGE}
<span title="the store's clock">${utc(new Date(ctx.now))}</span></div></header>
<main>${notice ? html`<div class="notice ok" role="status">${notice}</div>` : ''}${body}</main></body></html>`;
}

/** A page for dashboard errors and refusals: a message, never a stack trace. */
export function messagePage(
  ctx: PageRequest | null,
  title: string,
  message: string,
  base = '',
): SafeHtml {
  if (ctx) return page(ctx, title, html`<h1>${title}</h1><div class="notice bad">${message}</div>`);
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body><h1>${title}</h1><p>${message}</p><p><a href="${base || '/'}">Back to the dashboard</a></p></body></html>`;
}

export function badge(kind: string, text = kind): SafeHtml {
  return html`<span class="badge ${kind}">${text}</span>`;
}

/** A table's head row: a `<th>` per column name; a column given as markup is used as it is. */
export function tableHead(columns: readonly (string | SafeHtml)[]): SafeHtml {
  const cells = columns.map((c) => (c instanceof SafeHtml ? c : html`<th>${c}</th>`));
  return html`<thead><tr>${cells}</tr></thead>`;
}

/** A numeric column's head (right-aligned, as its cells). */
export function numHead(name: string | SafeHtml): SafeHtml {
  return html`<th class="num">${name}</th>`;
}
