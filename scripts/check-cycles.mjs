#!/usr/bin/env node
// Fails when any package's source has an import cycle, type-only imports included (a cycle of
// types still ties files together: neither can be read, moved or tested without the other).
// Reads every `packages/*/src/**/*.ts` with TypeScript's own import scanner and reports each
// cycle as the files it goes through.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else if (/\.tsx?$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The file a relative specifier names (`./a.js` → `./a.ts`, `./dir` → `./dir/index.ts`). */
function target(from, specifier, known) {
  const base = resolve(dirname(from), specifier);
  for (const candidate of [
    base.replace(/\.js$/, '.ts'),
    base.replace(/\.js$/, '.tsx'),
    `${base}.ts`,
    join(base, 'index.ts'),
  ]) {
    if (known.has(candidate)) return candidate;
  }
  return null;
}

/** Strongly connected components (Tarjan): every cycle lives in one of more than one file. */
function components(graph) {
  let index = 0;
  const stack = [];
  const state = new Map();
  const found = [];
  const visit = (node) => {
    state.set(node, { index, low: index, onStack: true });
    index += 1;
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!state.has(next)) {
        visit(next);
        state.get(node).low = Math.min(state.get(node).low, state.get(next).low);
      } else if (state.get(next).onStack) {
        state.get(node).low = Math.min(state.get(node).low, state.get(next).index);
      }
    }
    if (state.get(node).low === state.get(node).index) {
      const component = [];
      let member;
      do {
        member = stack.pop();
        state.get(member).onStack = false;
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component);
    }
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

/** One concrete cycle through `component`, as a path. */
function cycleIn(component, graph) {
  const inside = new Set(component);
  const start = component[0];
  const path = [start];
  const seen = new Set([start]);
  const walk = (node) => {
    for (const next of graph.get(node) ?? []) {
      if (!inside.has(next)) continue;
      if (next === start) return true;
      if (seen.has(next)) continue;
      seen.add(next);
      path.push(next);
      if (walk(next)) return true;
      path.pop();
    }
    return false;
  };
  walk(start);
  return [...path, start];
}

let failures = 0;
const packagesDir = join(root, 'packages');
for (const pkg of readdirSync(packagesDir)) {
  const src = join(packagesDir, pkg, 'src');
  try {
    if (!statSync(src).isDirectory()) continue;
  } catch {
    continue;
  }
  const all = files(src);
  const known = new Set(all);
  const graph = new Map();
  for (const file of all) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const edges = [];
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const to = target(file, ref.fileName, known);
      if (to) edges.push(to);
    }
    graph.set(file, [...new Set(edges)]);
  }
  for (const component of components(graph)) {
    failures += 1;
    const cycle = cycleIn(component, graph).map((f) => relative(src, f));
    console.error(
      `packages/${pkg}: import cycle of ${component.length} files: ${cycle.join(' → ')}`,
    );
  }
}
if (failures > 0) {
  console.error(
    `\n${failures} import cycle(s), type imports included. Move what both sides need into a file of its own.`,
  );
  process.exit(1);
}
console.log('no import cycles (type imports included) in packages/*/src');
