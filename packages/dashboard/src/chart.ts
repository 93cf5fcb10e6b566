/** The overview's chart: jobs started, completed and failed per minute over the last hour, as inline SVG. */
import { html, type SafeHtml } from './html.js';

export interface ChartSeries {
  started: number[];
  completed: number[];
  failed: number[];
}

const W = 1100;
const H = 200;
const PAD = { left: 40, right: 10, top: 10, bottom: 22 };

/** Buckets per minute, oldest first; `minutes` buckets ending at `now`. */
export function emptySeries(minutes: number): ChartSeries {
  return {
    started: new Array(minutes).fill(0),
    completed: new Array(minutes).fill(0),
    failed: new Array(minutes).fill(0),
  };
}

/** Adds one event at `at` to `series[name]` (ignored outside the window). */
export function addEvent(
  series: ChartSeries,
  name: keyof ChartSeries,
  at: number,
  now: number,
): void {
  const buckets = series[name];
  const index = buckets.length - 1 - Math.floor((now - at) / 60_000);
  if (index >= 0 && index < buckets.length) buckets[index] = (buckets[index] ?? 0) + 1;
}

function niceMax(value: number): number {
  if (value <= 4) return 4;
  const step = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * step >= value) return m * step;
  return 10 * step;
}

/**
 * Bars per minute: jobs started (left bar) and jobs finished (right bar: completed, with failed
 * stacked on top). Bars, not lines: a burst in one minute reads as a bar, not as a spike from
 * nothing, and an empty hour as an empty chart with its axis.
 */
export function barChart(series: ChartSeries): SafeHtml {
  const n = series.started.length;
  const finished = series.completed.map((c, i) => c + (series.failed[i] ?? 0));
  const peak = Math.max(0, ...series.started, ...finished);
  const max = niceMax(Math.max(1, peak));
  const slot = (W - PAD.left - PAD.right) / Math.max(1, n);
  const bar = Math.max(1, Math.floor(slot * 0.4));
  const left = (i: number): number => PAD.left + i * slot + (slot - 2 * bar - 1) / 2;
  const y = (v: number): number => PAD.top + (H - PAD.top - PAD.bottom) * (1 - v / max);
  const ago = (i: number): string => (i === n - 1 ? 'this minute' : `${n - 1 - i} min ago`);

  /** A bar from value `from` up to `to` (none when empty), its count in its tooltip. */
  const rect = (cls: string, x: number, from: number, to: number, title: string): SafeHtml => {
    if (to <= from) return html``;
    const height = (y(from) - y(to)).toFixed(1);
    const box = html`x="${x.toFixed(1)}" y="${y(to).toFixed(1)}" width="${bar}" height="${height}"`;
    return html`<rect class="${cls}" ${box}><title>${title}</title></rect>`;
  };
  /** Minute `i`: started on the left; completed with failed stacked on top, on the right. */
  const bars = (started: number, i: number): SafeHtml[] => {
    const completed = series.completed[i] ?? 0;
    const failed = series.failed[i] ?? 0;
    const x = left(i);
    const right = x + bar + 1;
    return [
      rect('started', x, 0, started, `${ago(i)}: ${started} started`),
      rect('completed', right, 0, completed, `${ago(i)}: ${completed} completed`),
      rect('failed', right, completed, completed + failed, `${ago(i)}: ${failed} failed`),
    ];
  };
  /** A grid line and its value on the left axis. */
  const tick = (t: number): SafeHtml => {
    const line = html`<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(t)}" y2="${y(t)}"/>`;
    const label = Number.isInteger(t) ? t : t.toFixed(1);
    return html`${line}<text x="${PAD.left - 6}" y="${y(t) + 4}" text-anchor="end">${label}</text>`;
  };
  /** `-45m` … `now` under the bars. */
  const minuteLabel = (m: number): SafeHtml => {
    const x = PAD.left + (n - m) * slot;
    const anchor = m === 0 ? 'end' : m === n ? 'start' : 'middle';
    const text = m === 0 ? 'now' : `-${m}m`;
    return html`<text x="${x.toFixed(1)}" y="${H - 6}" text-anchor="${anchor}">${text}</text>`;
  };
  const middle = html`x="${(W + PAD.left) / 2}" y="${(H - PAD.bottom) / 2}" text-anchor="middle"`;
  const empty = html`<text class="empty" ${middle}>no job finished in the last hour</text>`;
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="jobs per minute, last hour">
${[0, max / 2, max].map(tick)}
${[60, 45, 30, 15, 0].filter((m) => m < n + 1).map(minuteLabel)}
${series.started.map(bars)}
${peak === 0 ? empty : ''}
</svg>`;
}
