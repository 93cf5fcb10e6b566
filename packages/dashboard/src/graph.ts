/**
 * A flow as a graph (`admin.getFlow`): an inline SVG, no script. Nodes are laid out in layers by
 * dependency depth (a node sits one layer right of its deepest parent), one box per node
 * coloured by its state or outcome and linked to its job, with an edge from each parent to its
 * child. Classes, not inline styles, carry the colours (the Content-Security-Policy forbids
 * inline styles), so the page's light and dark themes apply.
 */
import type { FlowNodeState, FlowNodeView, FlowView } from '@jobs/core';
import { href, type PageRequest } from './context.js';
import { clip } from './format.js';
import { html, type SafeHtml } from './html.js';

const BOX_W = 168;
const BOX_H = 44;
const GAP_X = 56;
const GAP_Y = 18;
const PAD = 12;

/** The colour class of a node: `waiting`, `running`, `completed`, `deadletter`, `cancelled`, `skipped`. */
export function nodeClass(state: FlowNodeState): string {
  switch (state) {
    case 'completed':
    case 'running':
    case 'deadletter':
    case 'cancelled':
    case 'skipped':
      return state;
    case 'unknown':
      return 'skipped';
    default:
      // pending, timer, async, blocked, suspended: not running, not ended.
      return 'waiting';
  }
}

/** Each node's layer: 0 without parents, else one more than its deepest parent. */
export function layersOf(nodes: readonly FlowNodeView[]): Map<string, number> {
  const byName = new Map(nodes.map((node) => [node.name, node]));
  const depth = new Map<string, number>();
  const visit = (name: string, seen: Set<string>): number => {
    const known = depth.get(name);
    if (known !== undefined) return known;
    const node = byName.get(name);
    // A flow's definition has no cycles (engine.flow refuses them); `seen` guards a bad record.
    if (!node || seen.has(name)) return 0;
    seen.add(name);
    let d = 0;
    for (const parent of node.dependsOn) {
      if (byName.has(parent)) d = Math.max(d, visit(parent, seen) + 1);
    }
    depth.set(name, d);
    return d;
  };
  for (const node of nodes) visit(node.name, new Set());
  return depth;
}

/**
 * The flow's nodes as an SVG graph, each box linking to its node's job once it has one; the box
 * of job `current` (the page's own job) is outlined.
 */
export function flowGraph(
  ctx: PageRequest,
  flow: FlowView,
  current: string | null = null,
): SafeHtml {
  const layers = layersOf(flow.nodes);
  const rows = new Map<number, number>();
  const at = new Map<string, { x: number; y: number }>();
  const rowOf = new Map<string, number>();
  // Layer by layer; within one, nodes sorted by their parents' mean row (fewer crossings).
  const byLayer = [...flow.nodes].sort(
    (a, b) => (layers.get(a.name) ?? 0) - (layers.get(b.name) ?? 0),
  );
  for (let i = 0; i < byLayer.length; ) {
    const layer = layers.get((byLayer[i] as FlowNodeView).name) ?? 0;
    const group: FlowNodeView[] = [];
    while (i < byLayer.length && (layers.get((byLayer[i] as FlowNodeView).name) ?? 0) === layer) {
      group.push(byLayer[i] as FlowNodeView);
      i += 1;
    }
    const mean = (node: FlowNodeView): number => {
      const parents = node.dependsOn.map((p) => rowOf.get(p)).filter((r) => r !== undefined);
      return parents.length === 0 ? 0 : parents.reduce((sum, r) => sum + r, 0) / parents.length;
    };
    const keyed = group.map((node, k) => ({ node, key: mean(node), k }));
    keyed.sort((a, b) => a.key - b.key || a.k - b.k);
    for (const { node } of keyed) {
      const row = rows.get(layer) ?? 0;
      rows.set(layer, row + 1);
      rowOf.set(node.name, row);
      at.set(node.name, { x: PAD + layer * (BOX_W + GAP_X), y: PAD + row * (BOX_H + GAP_Y) });
    }
  }
  const columns = Math.max(1, ...[...layers.values()].map((layer) => layer + 1));
  const height = Math.max(1, ...rows.values());
  const width = PAD * 2 + columns * BOX_W + (columns - 1) * GAP_X;
  const tall = PAD * 2 + height * BOX_H + (height - 1) * GAP_Y;
  const edges = flow.nodes.flatMap((node) =>
    node.dependsOn.map((parent) => {
      const from = at.get(parent);
      const to = at.get(node.name);
      if (!from || !to) return html``;
      const x1 = from.x + BOX_W;
      const y1 = from.y + BOX_H / 2;
      const x2 = to.x;
      const y2 = to.y + BOX_H / 2;
      const mid = (x1 + x2) / 2;
      return html`<path class="edge" d="M${x1} ${y1} C${mid} ${y1} ${mid} ${y2} ${x2 - 4} ${y2}" marker-end="url(#arrow)"/>`;
    }),
  );
  const boxes = flow.nodes.map((node) => {
    const { x, y } = at.get(node.name) as { x: number; y: number };
    const kind = `${nodeClass(node.state)}${node.jobId !== null && node.jobId === current ? ' current' : ''}`;
    const tip = `${node.name} (${node.type}): ${node.state}${node.reason ? ` — ${node.reason}` : ''}`;
    const box = html`<g class="node ${kind}" data-node="${node.name}" data-state="${node.state}"><title>${tip}</title><rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="6"/><text x="${x + 10}" y="${y + 18}" class="name">${clip(node.name, 22)}</text><text x="${x + 10}" y="${y + 34}" class="state">${clip(`${node.state} · ${node.type}`, 26)}</text></g>`;
    if (node.jobId === null) return box;
    return html`<a href="${href(ctx, `/jobs/${encodeURIComponent(node.jobId)}`)}">${box}</a>`;
  });
  return html`<svg class="flow-graph" role="img" aria-label="flow ${flow.id}: ${flow.nodes.length} nodes" viewBox="0 0 ${width} ${tall}" width="${width}" height="${tall}"><defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="8" markerHeight="8" orient="auto"><path d="M0 0 L8 4 L0 8 z" class="arrow"/></marker></defs>${edges}${boxes}</svg>
<div class="legend">${['waiting', 'running', 'completed', 'deadletter', 'cancelled', 'skipped'].map(
    (kind) =>
      html`<span><i class="node-${kind}"></i>${kind === 'deadletter' ? 'dead-lettered' : kind}</span>`,
  )}</div>`;
}
