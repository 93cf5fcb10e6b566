/** The page shell: head, top bar with the tabs, notices, and the body a page renders. */
import { CSS_FILE, JS_FILE } from './assets.js';
import { type Ctx, href } from './context.js';
import { utc } from './format.js';
import { html, type SafeHtml } from './html.js';

const TABS: [string, string][] = [
  ['/', 'Overview'],
  ['/jobs', 'Jobs'],
  ['/deadletter', 'Dead letter'],
  ['/schedules', 'Schedules'],
  ['/history', 'History'],
];

/** Messages after an action's redirect, by code (never text from the query string). */
const DONE: Record<string, (n: string) => string> = {
  retried: (n) => `Retried ${n} job(s): they are due now.`,
  deleted: (n) => `Deleted ${n} job(s).`,
  cancelled: () => 'Cancelled: the job was removed and will not run.',
  'cancel-requested': () =>
    'Cancellation requested: the worker running it is told at its next lease renewal.',
  suspended: (n) => `Suspended ${n} waiting job(s).`,
  activated: (n) => `Activated ${n} job(s).`,
  paused: () => 'Schedule paused.',
  resumed: () => 'Schedule resumed.',
};

export function page(ctx: Ctx, title: string, body: SafeHtml): SafeHtml {
  const section = ctx.path === '/' ? '/' : `/${ctx.path.split('/')[1] ?? ''}`;
  const done = ctx.query.get('done');
  const notice =
    done && DONE[done] ? DONE[done]((ctx.query.get('n') ?? '').replace(/\D/g, '') || '1') : null;
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
<div class="meta"><span class="mono">${ctx.store.name}</span>
${ctx.canAct ? html`<span class="badge ok">actions on</span>` : html`<span class="badge neutral" title="Actions need createDashboard({ authorize }) (CLI: --allow-actions)">read-only</span>`}
<span title="the store's clock">${utc(new Date(ctx.now))}</span></div></header>
<main>${notice ? html`<div class="notice ok" role="status">${notice}</div>` : ''}${body}</main></body></html>`;
}

/** A page for dashboard errors and refusals: a message, never a stack trace. */
export function messagePage(ctx: Ctx | null, title: string, message: string, base = ''): SafeHtml {
  if (ctx) return page(ctx, title, html`<h1>${title}</h1><div class="notice bad">${message}</div>`);
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body><h1>${title}</h1><p>${message}</p><p><a href="${base || '/'}">Back to the dashboard</a></p></body></html>`;
}

export function badge(kind: string, text = kind): SafeHtml {
  return html`<span class="badge ${kind}">${text}</span>`;
}
