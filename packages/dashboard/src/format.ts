/** How values read on a page: relative times (absolute in a title), counts, JSON (durations: text.ts). */
import { html, type SafeHtml } from './html.js';
import { relativeText, inZone as zonedText } from './text.js';

/** ISO-8601 in UTC, to the second. */
export function utc(at: Date): string {
  return `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A `<time>`: relative text, absolute time in its title. */
export function timeCell(at: Date | null | undefined, now: number): SafeHtml {
  if (!at) return html`<span class="muted">—</span>`;
  return html`<time datetime="${at.toISOString()}" title="${utc(at)}">${relativeText(at, now)}</time>`;
}

/** An instant in a time zone: `2026-11-24 03:00:00 Europe/Berlin`; UTC for a zone `Intl` lacks. */
export function inZone(at: Date, timeZone: string): string {
  try {
    return zonedText(at, timeZone);
  } catch {
    return utc(at);
  }
}

/** `12,345`. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** A count that may have hit its cap: `10,000+`. */
export function cappedCount(n: number, cap: number): string {
  return n >= cap ? `${count(cap - 1)}+` : count(n);
}

/** Pretty JSON for display (already safe to escape). */
export function prettyJson(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2) ?? 'undefined';
  } catch {
    return String(value);
  }
}

/** A name in a list or table cell: a long one clipped, in full in its tooltip. */
export function shortName(value: string, max = 60): SafeHtml | string {
  return value.length > max ? html`<span title="${value}">${clip(value, max)}</span>` : value;
}

/** At most `max` characters, with an ellipsis. */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
